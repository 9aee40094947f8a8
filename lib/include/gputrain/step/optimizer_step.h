#pragma once
// One optimizer step over the micro-batches of a global batch: forward, loss,
// backward, then unscale, clip and step. Two variants behind one interface:
// eager, and train.cuda_graph's captured step replayed.
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "gputrain/data/batch_loader.h"
#include "gputrain/optim/loss.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/cuda_graph.h"
#include "gputrain/step/non_finite.h"

namespace gputrain::step {

// Clips the gradients' global L2 norm to max_norm (> 0) and returns the norm
// before clipping, a 0-dim tensor on the gradients' device. Unlike LibTorch's
// torch::nn::utils::clip_grad_norm_, which returns a double and so waits for
// the device every step, nothing here reads the host: a CUDA graph can capture
// it, and an eager step does not stall on it. With fp16, call it after
// GradScaler::unscale_ so it sees the true gradients; if they hold inf/NaN the
// norm is not finite and the clipped gradients are garbage, which is harmless
// because step() skips them.
torch::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm);

// What one micro-batch measured, on the device (no sync).
struct MicroBatchSums {
  torch::Tensor loss_sum;
  torch::Tensor correct;  // undefined for regression
  int64_t samples = 0;
};

struct StepResult {
  std::vector<MicroBatchSums> sums;
  parallel::StepFlags agreed;  // what every rank agreed; non_finite: no update was made
  // fp16: the gradients held inf/NaN, so the scaler made no update; the scale it backs off from.
  std::optional<double> scaler_skipped_at;
};

// The step's one collective: this rank's requests and its step loss (undefined
// when it need not be checked) in, the flags every rank agreed on out.
using AgreeFn = std::function<parallel::StepFlags(const torch::Tensor& step_loss)>;

class OptimizerStep {
 public:
  virtual ~OptimizerStep() = default;
  // Runs the step on `group` (its rows summed into one update, as one batch
  // of their combined size), unless the ranks agree the loss is not finite.
  virtual StepResult run(const std::vector<data::Batch>& group, const AgreeFn& agree) = 0;
};

// The parts of a training step in the order it runs them; the point each
// phase ends at, for bench, which times the step that trains (as Caffe's
// `time` runs the real net) rather than a copy of it.
enum class StepPhase { kForward, kBackward, kOptimizer };
using PhaseHook = std::function<void(StepPhase ended)>;

// What a step is made of, for the eager step and the CUDA graph alike.
struct StepParts {
  parallel::Strategy* strategy = nullptr;  // its device is the step's; ddp sums the gradients
  torch::nn::Sequential model{nullptr};
  torch::optim::Optimizer* optimizer = nullptr;
  GradScaler* scaler = nullptr;  // fp16's scaler (disabled otherwise); never null
  optim::LossSpec loss;
  AmpMode amp = AmpMode::kOff;
  bool channels_last = false;
  double grad_clip = 0;  // 0: off
  // ddp.gradient_as_bucket_view: gradients are views into the Reducer's
  // buckets, so they are zeroed in place rather than dropped.
  bool zero_grad_in_place = false;
  // Set: train.on_nan's check runs on the device, and the optimizer (given
  // the check's found()) skips a non-finite step itself; the agreement then
  // gets no loss to read. Null: agree() reads the step's loss (one sync).
  NonFiniteSteps* non_finite = nullptr;
  // The eager step calls it as each micro-batch's forward pass and backward
  // pass end and as the update ends (bench); empty: nothing is called.
  PhaseHook phase_done;
};
std::unique_ptr<OptimizerStep> make_eager_step(const StepParts& parts);

// train.cuda_graph: `parts.optimizer` comes from make_optimizer with optim.fused or optim.foreach; groups of
// `micro_batches` micro-batches of `rows` replay the graph, an epoch's last group runs eagerly. The
// non-finite check, the scaler and ddp's sums are captured with the step; every part must outlive it.
std::unique_ptr<OptimizerStep> make_graphed_step(const StepParts& parts, int64_t rows, int64_t micro_batches);

}  // namespace gputrain::step
