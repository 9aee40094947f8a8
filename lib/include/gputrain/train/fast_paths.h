#pragma once
// The train.* switches that change how a step runs, not what it computes:
// train.cudnn_benchmark and train.channels_last (train.cuda_graph is in
// cuda_graph.h, optim.foreach / optim.fused in optim.h).
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <string>

#include "gputrain/config/config.h"

namespace gputrain::train {

// train.matmul_precision resolved for `device`, with why.
struct MatmulPrecisionPlan {
  std::string value;   // highest | high | medium, as at::Context takes it
  std::string reason;  // for the log
};
MatmulPrecisionPlan resolve_matmul_precision(config::MatmulPrecision setting, const torch::Device& device);

// Process-wide settings for a run on `device`: train.matmul_precision, train.threads, LibTorch's
// intra-op threads (left alone at 0), and cuDNN's benchmark mode (it times the
// convolution algorithms for each new input shape and keeps the fastest).
// Logs what it changed, and that cuDNN's mode does nothing off CUDA.
void configure_backends(const config::TrainConfig& train, const torch::Device& device);

// train.channels_last: the model's 4-D parameters (convolution weights) in
// channels-last memory format, which cuDNN's and oneDNN's fastest
// convolutions use. Parameters keep their identity (the optimizer's and
// checkpoints' references stay valid); only their strides change.
void to_channels_last(torch::nn::Sequential& model);

// What the model's forward pass is given: with channels_last on, 4-D
// `inputs` moved to `device` (non-blocking from pinned memory) and reordered
// there; otherwise `inputs` as they are (the strategy moves them).
torch::Tensor model_inputs(const torch::Tensor& inputs, const torch::Device& device, bool channels_last);

}  // namespace gputrain::train
