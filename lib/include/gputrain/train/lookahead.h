#pragma once
// optim.lookahead (Zhang et al. 2019, "Lookahead Optimizer: k steps forward,
// 1 step back"), around whichever optimizer the run has.
#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gputrain::train {

struct LookaheadOptions {
  int64_t k = 5;       // optimizer steps between syncs, >= 1
  double alpha = 0.5;  // in (0, 1]
};

// Slow weights beside the model's trained parameters (the fast ones). start()
// copies the parameters; after every k-th optimizer step of the run, sync()
// does slow += alpha × (fast − slow) and fast = slow, as two multi-tensor ops
// (_foreach_lerp_, _foreach_copy_) on the parameters' device and stream. The
// optimizer's state (momentum, Adam's moments) is left as it is, as in the
// paper's PyTorch code.
//
// It runs after the optimizer step, outside train.cuda_graph's captured step:
// the captured graph reads and writes the parameters in place, so ops queued
// between two replays on the same stream are seen by the next one, and the
// graph and its fused step stay as they are. Under ddp each rank holds the
// same weights after the step and runs the same ops on them, so the ranks
// stay equal without a collective.
class Lookahead {
 public:
  // The parameters of `model` that train (requires_grad): frozen ones never move.
  Lookahead(torch::nn::Module& model, LookaheadOptions options);

  // The slow weights become a copy of the parameters (the run's start, or a
  // resumed run whose checkpoint held none).
  void start();
  bool started() const { return !slow_.empty(); }

  // After optimizer step `step` (1-based, counted over the run): syncs when
  // it is a multiple of k, and returns whether it did.
  bool after_step(int64_t step);
  void sync();

  // What a checkpoint keeps: the slow weights, in the parameters' order.
  const std::vector<torch::Tensor>& state() const { return slow_; }
  // A checkpoint's slow weights; CheckpointError naming `checkpoint` when they
  // do not fit the parameters. Empty: not started (start() then begins anew).
  void load(const std::vector<torch::Tensor>& state, const std::string& checkpoint);

 private:
  LookaheadOptions options_;
  std::vector<torch::Tensor> fast_;  // the model's trained parameters
  std::vector<torch::Tensor> slow_;
};

}  // namespace gputrain::train
