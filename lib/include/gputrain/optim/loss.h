#pragma once
// The loss: which one a run uses, its sum over a batch, and its backward pass.
#include <torch/types.h>

#include <cstdint>
#include <map>

#include "gputrain/config/config.h"

namespace gputrain::optim {

enum class LossKind { kCrossEntropy, kMse };

// train.loss; "auto" means cross_entropy for class labels, mse for values.
// cross_entropy on real-valued targets, or mse on class labels, is a
// ConfigError on train.loss.
LossKind resolve_loss(config::LossName name, bool class_targets);

// What a run's loss is computed from.
struct LossSpec {
  LossKind kind = LossKind::kCrossEntropy;
  int64_t classes = 0;          // classification: the classes; 0 otherwise
  torch::Tensor class_weights;  // train.class_weights on the device; undefined when none
  double label_smoothing = 0;   // train.label_smoothing (cross_entropy only)
};

// Sum of the per-sample losses (callers divide), so accumulation and replicas
// can weight by their real share of the batch.
//   cross_entropy: sum over samples of -log softmax(outputs)[target]
//                  (cross_entropy with reduction sum; int64 class targets [N]).
//   mse:           sum over samples of the mean squared error over that
//                  sample's values, i.e. mse_loss(reduction none).flatten(1).mean(1).sum();
//                  outputs and targets must both be [N, values...]. Divided by
//                  N it equals PyTorch's MSELoss (reduction mean) for any
//                  number of values per sample, since each sample has as many.
// With `class_weights` (cross_entropy only, one per class) each sample's loss
// is weighted by its class's weight, and the sum scaled by N / (the sum of the
// batch's weights): divided by N it is PyTorch's CrossEntropyLoss(weight=...)
// with its weighted mean. With `label_smoothing` ε each sample's target is
// 1 - ε on its class plus ε / C on every class, as CrossEntropyLoss(label_smoothing=ε).
torch::Tensor loss_sum(const LossSpec& loss, const torch::Tensor& outputs, const torch::Tensor& targets);

// How many rows' largest output is their target class, as
// outputs.argmax(1).eq(targets).sum(): a 0-dim int64 tensor on the outputs'
// device, never synced; undefined for regression.
torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification);

// Backpropagates a loss summed over samples as their mean: backward() from
// the sum with 1/samples as its incoming gradient. Dividing the sum first
// gives the same gradients bit for bit but costs a division, its autograd
// node and a ones_like per micro-batch, which small models feel.
class MeanBackward {
 public:
  void operator()(const torch::Tensor& loss_sum, int64_t samples);

 private:
  std::map<int64_t, torch::Tensor> weights_;  // 1/samples by samples: a full batch and the epoch's last
};

}  // namespace gputrain::optim
