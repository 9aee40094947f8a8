#pragma once
// What one training step holds on its device, measured by running one.
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/optim/loss.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/fast_paths.h"
#include "gputrain/plan/model_init.h"

namespace gputrain::plan {

struct StepMemory {
  int64_t parameters = 0;       // bytes of the weights
  int64_t gradients = 0;        // one per trainable weight
  int64_t optimizer_state = 0;  // momentum, moments: as the optimizer holds them after a step
  int64_t activations = 0;      // what the forward pass keeps for backward
  std::string measured_by;      // how `activations` was measured, for the report
  int64_t total() const { return parameters + gradients + optimizer_state + activations; }
};

// One training step's memory on each device the strategy uses, against what
// each has free (`gputrain plan`).
struct DeviceMemory {
  std::string device;  // "cuda:0", "cpu"
  int64_t needed = 0;  // bytes one step holds there, dp's replicas on the device together
  int64_t replicas = 0;
  int64_t free = -1;  // bytes free when the plan was made; -1: unknown
};
struct MemoryPlan {
  StepMemory step;
  int64_t measured_rows = 0;  // the largest share of a micro-batch any device gets
  std::vector<DeviceMemory> devices;
};

// Runs one forward pass (under `amp`), backward and optimizer step of `model`
// on `batch` and measures each kind of memory. Activations: on CUDA the
// caching allocator's peak over the forward and backward, less the gradients;
// elsewhere the bytes of every layer's output (what autograd keeps for
// backward), since the CPU allocator keeps no statistics. Changes the model's
// weights: use it on a model built for the measurement.
StepMemory measure_step_memory(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                               const data::Batch& batch, const optim::LossSpec& loss, config::AmpMode amp,
                               bool channels_last);

// The run's model, optimizer and loss as the run builds them
// (plan::assemble_trainable, with `init`'s tensors and frozen parameters; fast
// paths resolved for micro-batches of `micro_batch` rows, `accumulation` a
// step), on the strategy's first device under `amp` (train.amp as the plan
// resolved it), to measure one training step of any number of rows of `train_set`.
class StepProbe {
 public:
  StepProbe(const config::LoadedConfig& loaded, const ModelInitPlan& init,
            std::shared_ptr<const data::Dataset> train_set, const parallel::StrategyPlan& strategy, config::AmpMode amp,
            int64_t micro_batch, int64_t accumulation);
  ~StepProbe();
  // One measured step on the first `rows` samples of an epoch; on 2 where
  // `rows` is 1 and a batchnorm layer normalises one value per channel, whose
  // training step cannot run on 1 (the plan refuses such batches:
  // data.batch_size: auto measures its smallest micro-batch, of 1, first).
  StepMemory measure(int64_t rows);

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

// Bytes of the state `optimizer` holds (SGD's momentum buffers, Adam's moments).
int64_t optimizer_state_bytes(const torch::optim::Optimizer& optimizer);

}  // namespace gputrain::plan
