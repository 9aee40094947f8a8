#pragma once
// train.ema: an exponential moving average of a model's weights, which the
// evaluations, model.pt and best.ckpt use in the weights' place.
#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gputrain::train {

struct WeightAverageOptions {
  double decay = 0.999;
  int64_t start_epoch = 1;  // the first epoch (1-based) whose steps update it
  int64_t every = 1;        // optimizer steps between updates
};

// PyTorch's AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay),
// use_buffers=True): over the parameters and then the buffers, the first
// update copies them and each later one does average += (1 - decay) *
// (weights - average) in one _foreach_lerp_; integer buffers (BatchNorm's
// num_batches_tracked) are copied, as nothing averages a count.
class WeightAverage {
 public:
  WeightAverage(torch::nn::Module& model, WeightAverageOptions options);

  // After optimizer step `step` (1-based, counted over the run) of epoch
  // `epoch`: updates the average when both say it is due.
  void after_step(int64_t step, int64_t epoch);
  void update();
  bool started() const { return !average_.empty(); }

  // Exchanges the model's tensors and the average, in place: a second call
  // exchanges them back. For evaluating the average; started() only.
  void swap_into_model();
  // The model takes the average's values (training is over).
  void copy_into_model();

  // What a checkpoint keeps: the average's tensors, empty before the first update.
  const std::vector<torch::Tensor>& state() const { return average_; }
  // A checkpoint's state; CheckpointError naming `checkpoint` when it does not fit the model.
  void load(const std::vector<torch::Tensor>& state, const std::string& checkpoint);

 private:
  WeightAverageOptions options_;
  std::vector<torch::Tensor> live_;  // the model's parameters, then its buffers
  std::vector<torch::Tensor> average_;
};

// The model's parameters, then its buffers: the order of WeightAverage's state.
std::vector<torch::Tensor> weights_and_buffers(torch::nn::Module& model);

// Copies of `stored` (a checkpoint's list of a model's tensors, in the order
// above) on the device of the `model_tensors` they stand for. CheckpointError
// naming `checkpoint` and `what` when the count, a shape or a dtype differs.
std::vector<torch::Tensor> fitting_tensors(const std::vector<torch::Tensor>& stored,
                                           const std::vector<torch::Tensor>& model_tensors, const std::string& what,
                                           const std::string& checkpoint);

}  // namespace gputrain::train
