#pragma once
// train.cuda_graph: the whole optimizer step (zeroing the gradients, forward,
// loss, backward and the fused optimizer's update) captured once as a CUDA
// graph and replayed for every later step, so a step costs one graph launch
// instead of one launch per kernel. A graph replays fixed addresses and fixed
// shapes: every batch is copied into one static input tensor, and the
// learning rate and step count reach the update through device tensors
// (optim.fused or optim.foreach), written before each replay. Accumulation, clipping and
// mixed precision are device work and are captured with the rest (GraphPlan):
// fp16's loss scaler unscales, checks and updates its scale on the device,
// and the fused update skips a step through the scaler's found_inf. Under ddp
// over NCCL the gradients' all-reduce (Strategy::sum_gradients) and the
// ranks' agreement on a non-finite loss are captured too.
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/optim/loss.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/non_finite.h"

namespace gputrain::step {

// Sums of one step, on the device (no sync): the summed per-sample loss and,
// for classification, the number of correct predictions.
struct StepSums {
  torch::Tensor loss_sum;
  torch::Tensor correct;
};

// The names of the trainable parameters of `model` whose gradient is still
// undefined (after the warm-up steps: ones the loss never reaches). A graph
// replays fixed gradient tensors, so such a model steps eagerly instead.
std::vector<std::string> parameters_without_gradient(const torch::nn::Module& model);

// What one replay covers: the K = `micro_batches` micro-batches of one
// optimizer step (train.accumulation_steps) together. The graph zeroes the
// gradients, runs forward (under autocast with `amp`), loss and backward K
// times, each on its slice of one static input buffer of K micro-batches
// (this process's rows of `micro_batch` samples: under ddp its rank's share), then (fp16) unscales, clips (when
// `grad_clip` > 0, on the device: clip_grad_norm) and updates. A group of another shape -- an epoch's last, with fewer
// micro-batches or a short last one -- runs eagerly on the same gradients and optimizer state rather than padded:
// padding rows would need masking out of the loss, the accuracy and batch-norm statistics.
struct GraphPlan {
  int64_t micro_batch = 0;    // samples per micro-batch, over every process
  double grad_clip = 0;       // train.grad_clip; 0: off
  int64_t micro_batches = 1;  // train.accumulation_steps
  AmpMode amp = AmpMode::kOff;

  // Whether `group` replays the graph: exactly `micro_batches` micro-batches of `micro_batch` samples each
  // (Batch::global_size: under ddp each rank holds its share of them).
  bool replays(const std::vector<data::Batch>& group) const;
  // The static buffer for micro-batch tensors shaped like `part` ([rows, ...]): [K x rows, ...].
  std::vector<int64_t> buffer_shape(const torch::Tensor& part) const;
};

class GraphedStep {
 public:
  // `optimizer` comes from make_optimizer with optim.fused or optim.foreach; it must outlive this.
  // Batches of `plan.micro_batch` samples are captured; others run eagerly.
  // `non_finite` (may be null) checks each step's loss inside the graph; the
  // optimizer was given its found() (skip_when) to skip a non-finite step.
  // `scaler` (may be null; fp16: enabled) scales the loss and skips the
  // update itself, on the device; it must outlive this. `processes` (may be
  // null: one process; ddp: prepared with GradientSync::kAfterBackward, over
  // NCCL) sums the gradients and agrees on the non-finite check inside the
  // step; it must outlive this.
  GraphedStep(torch::nn::Sequential model, torch::optim::Optimizer& optimizer, const optim::LossSpec& loss,
              bool channels_last, torch::Device device, const GraphPlan& plan, NonFiniteSteps* non_finite = nullptr,
              GradScaler* scaler = nullptr, parallel::Strategy* processes = nullptr);
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  // One optimizer step on the micro-batches of `group`, after the caller has
  // set this step's learning rate; their sums, one per micro-batch. The first
  // steps run eagerly on a side stream (warming up cuDNN, cuBLAS and the
  // allocator, as a capture requires), the next is captured and replayed,
  // every later one replayed. A group of another shape (an epoch's last) runs
  // eagerly, on the same gradients and optimizer state. A step that cannot be
  // captured (a parameter without a gradient after the warm-up) makes every
  // later step eager, with a warning.
  std::vector<StepSums> step(const std::vector<data::Batch>& group);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::step
