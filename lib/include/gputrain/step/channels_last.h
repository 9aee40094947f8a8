#pragma once
// train.channels_last's mechanics: the model's parameters and the inputs in
// channels-last memory format (the rule that turns it on: plan/fast_paths.h).
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

namespace gputrain::step {

// train.channels_last: the model's 4-D parameters (convolution weights) in
// channels-last memory format, which cuDNN's and oneDNN's fastest
// convolutions use. Parameters keep their identity (the optimizer's and
// checkpoints' references stay valid); only their strides change.
void to_channels_last(torch::nn::Sequential& model);

// What the model's forward pass is given: with channels_last on, 4-D
// `inputs` moved to `device` (non-blocking from pinned memory) and reordered
// there; otherwise `inputs` as they are (the strategy moves them).
torch::Tensor model_inputs(const torch::Tensor& inputs, const torch::Device& device, bool channels_last);

}  // namespace gputrain::step
