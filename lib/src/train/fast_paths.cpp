#include "gputrain/train/fast_paths.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gputrain::train {

MatmulPrecisionPlan resolve_matmul_precision(config::MatmulPrecision setting, const torch::Device& device) {
  if (setting != config::MatmulPrecision::kAuto) return {config::word(setting), "train.matmul_precision"};
  if (device.is_cuda()) return {"high", "auto: TF32 matmuls on CUDA, as cuDNN's convolutions already use"};
  return {"highest", fmt::format("auto: full float32 on {}", device.str())};
}

void configure_backends(const config::TrainConfig& train, const torch::Device& device) {
  const MatmulPrecisionPlan precision = resolve_matmul_precision(train.matmul_precision, device);
  at::globalContext().setFloat32MatmulPrecision(precision.value);
  spdlog::info("train.matmul_precision: {} ({})", precision.value, precision.reason);
  if (train.threads > 0) {
    at::set_num_threads(static_cast<int>(train.threads));
    spdlog::info("train.threads: {} intra-op thread(s) for CPU ops", train.threads);
  }
  at::globalContext().setBenchmarkCuDNN(train.cudnn_benchmark);
  if (!train.cudnn_benchmark) return;
  if (device.is_cuda()) {
    spdlog::info("train.cudnn_benchmark: cuDNN times its convolution algorithms for each new input shape");
  } else {
    spdlog::info("train.cudnn_benchmark: no effect on {} (cuDNN runs on CUDA only)", device.str());
  }
}

void to_channels_last(torch::nn::Sequential& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

torch::Tensor model_inputs(const torch::Tensor& inputs, const torch::Device& device, bool channels_last) {
  if (!channels_last || inputs.dim() != 4) return inputs;
  // Reordered on the device, where it is cheap, not on the host.
  return inputs.to(device, /*non_blocking=*/true).contiguous(at::MemoryFormat::ChannelsLast);
}

}  // namespace gputrain::train
