#include "gputrain/plan/step_memory.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>

#include "gputrain/data/host_loader.h"
#include "gputrain/device/memory.h"
#include "gputrain/models/factory.h"
#include "gputrain/models/freeze.h"
#include "gputrain/models/whiten.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/plan/data_keys.h"
#include "gputrain/plan/trainable.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/channels_last.h"

namespace gputrain::plan {

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
                               const data::Batch& batch, const optim::LossSpec& loss, config::AmpMode amp,
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
    step::AutocastScope autocast(amp, device.type());
    for (auto& layer : *model) {
      outputs = layer.forward(outputs);
      layer_outputs += bytes_of(outputs);
    }
  }
  torch::Tensor total = batch.targets.defined()
                            ? optim::loss_sum(loss, outputs.to(torch::kFloat32), batch.targets.to(device))
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

struct StepProbe::Parts {
  const config::LoadedConfig& loaded;
  std::shared_ptr<const data::Dataset> train_set;
  torch::Device device;
  config::AmpMode amp;
  FastPaths fast;
  Trainable trainable;
  optim::LossSpec loss;
  int64_t fewest_rows = 1;  // a training step's
};

StepProbe::StepProbe(const config::LoadedConfig& loaded, const ModelInitPlan& init,
                     std::shared_ptr<const data::Dataset> train_set, const parallel::StrategyPlan& strategy,
                     config::AmpMode amp, int64_t micro_batch, int64_t accumulation)
    : parts_(std::make_unique<Parts>(Parts{loaded, std::move(train_set), strategy.replicas.front(), amp, {}, {}, {}})) {
  const config::ExperimentConfig& c = loaded.config;
  Parts& p = *parts_;
  torch::manual_seed(c.seed);
  const data::DatasetInfo& data = p.train_set->info();
  // The fast paths for this probe's batches, on the model's facts as the plan traces them (on the CPU).
  torch::nn::Sequential traced = models::build_model(c.model, data, torch::kCPU);
  p.fast =
      plan_fast_paths(c, run_facts(model_facts(traced, data.input_shape), strategy, micro_batch, accumulation, amp));
  const config::OptimConfig optim = resolved_optim(c.optim, p.fast);
  p.trainable =
      assemble_trainable({c.model, c.data.normalize, *p.train_set, init, optim, p.fast.channels_last, p.device});
  // The step below runs every layer in training mode (model->train()), frozen batchnorm layers too.
  if (!models::batchnorm_of_single_values(p.trainable.model, data.input_shape).empty()) p.fewest_rows = 2;
  p.loss = build_loss(loaded, data, p.device);
}

StepProbe::~StepProbe() = default;

StepMemory StepProbe::measure(int64_t rows) {
  Parts& p = *parts_;
  const config::ExperimentConfig& c = p.loaded.config;
  data::LoaderOptions options =
      data::loader_options(c.data, data::Split::kTrain, std::max(rows, p.fewest_rows), c.seed);
  options.num_workers = 0;
  options.pin_memory = false;
  data::HostLoader loader(p.train_set, options);
  loader.start_epoch(0);
  const data::Batch batch = *loader.next();
  return measure_step_memory(p.trainable.model, *p.trainable.optimizer, batch, p.loss, p.amp, p.fast.channels_last);
}

}  // namespace gputrain::plan
