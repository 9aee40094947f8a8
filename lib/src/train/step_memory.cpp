#include "gputrain/train/step_memory.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "gputrain/device/memory.h"
#include "gputrain/train/amp.h"

namespace gputrain::train {

namespace {

int64_t bytes_of(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

}  // namespace

int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      bytes += bytes_of(sgd->momentum_buffer());
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      bytes += bytes_of(adam->exp_avg()) + bytes_of(adam->exp_avg_sq()) + bytes_of(adam->max_exp_avg_sq());
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state.get())) {
      bytes += bytes_of(adamw->exp_avg()) + bytes_of(adamw->exp_avg_sq()) + bytes_of(adamw->max_exp_avg_sq());
    }
  }
  return bytes;
}

StepMemory measure_step_memory(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                               const data::Batch& batch, const LossSpec& loss, config::AmpMode amp,
                               bool channels_last) {
  StepMemory memory;
  const auto parameters = model->parameters();
  const torch::Device device = parameters.empty() ? torch::Device(torch::kCPU) : parameters.front().device();
  for (const auto& p : parameters) {
    memory.parameters += bytes_of(p);
    if (p.requires_grad()) memory.gradients += bytes_of(p);
  }
  torch::Tensor inputs = batch.inputs.to(device);
  if (channels_last && inputs.dim() == 4) inputs = inputs.contiguous(torch::MemoryFormat::ChannelsLast);
  model->train();
  optimizer.zero_grad();
  device::reset_peak_memory(device);
  const int64_t before = device::memory_stats(device).allocated;
  int64_t layer_outputs = 0;
  torch::Tensor outputs = inputs;
  {
    AutocastScope autocast(amp, device.type());
    for (auto& layer : *model) {
      outputs = layer.forward(outputs);
      layer_outputs += bytes_of(outputs);
    }
  }
  torch::Tensor total = batch.targets.defined() ? loss_sum(loss.kind, outputs.to(torch::kFloat32),
                                                           batch.targets.to(device), loss.class_weights)
                                                : outputs.to(torch::kFloat32).sum();
  total.backward();
  if (device.is_cuda()) {
    const int64_t peak = device::memory_stats(device).peak_allocated - before;
    memory.activations = std::max<int64_t>(0, peak - memory.gradients);
    memory.measured_by = "the allocator's peak over one forward and backward, less the gradients";
  } else {
    memory.activations = layer_outputs;
    memory.measured_by = "the layers' outputs in one forward pass";
  }
  optimizer.step();
  memory.optimizer_state = optimizer_state_bytes(optimizer);
  return memory;
}

}  // namespace gputrain::train
