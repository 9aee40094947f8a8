#include "gputrain/step/channels_last.h"

namespace gputrain::step {

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

}  // namespace gputrain::step
