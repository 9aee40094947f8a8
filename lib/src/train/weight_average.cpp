#include "gputrain/train/weight_average.h"

#include <ATen/ops/_foreach_lerp.h>
#include <fmt/format.h>

#include "gputrain/common/error.h"

namespace gputrain::train {

std::vector<torch::Tensor> weights_and_buffers(torch::nn::Module& model) {
  std::vector<torch::Tensor> all = model.parameters();
  for (const torch::Tensor& buffer : model.buffers()) all.push_back(buffer);
  return all;
}

WeightAverage::WeightAverage(torch::nn::Module& model, WeightAverageOptions options)
    : options_(options), live_(weights_and_buffers(model)) {}

void WeightAverage::after_step(int64_t step, int64_t epoch) {
  if (epoch >= options_.start_epoch && step % options_.every == 0) update();
}

void WeightAverage::update() {
  torch::NoGradGuard no_grad;
  if (average_.empty()) {
    for (const torch::Tensor& t : live_) average_.push_back(t.detach().clone());
    return;
  }
  std::vector<torch::Tensor> averaged;
  std::vector<torch::Tensor> current;
  for (std::size_t i = 0; i < live_.size(); ++i) {
    if (torch::isFloatingType(live_[i].scalar_type())) {
      averaged.push_back(average_[i]);
      current.push_back(live_[i].detach());
    } else {
      average_[i].copy_(live_[i]);
    }
  }
  if (!averaged.empty()) at::_foreach_lerp_(averaged, current, 1.0 - options_.decay);
}

void WeightAverage::swap_into_model() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < live_.size(); ++i) {
    const torch::Tensor held = live_[i].detach().clone();
    live_[i].detach().copy_(average_[i]);
    average_[i].copy_(held);
  }
}

void WeightAverage::copy_into_model() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < live_.size(); ++i) live_[i].detach().copy_(average_[i]);
}

void WeightAverage::load(const std::vector<torch::Tensor>& state, const std::string& checkpoint) {
  average_ = state.empty() ? state : fitting_tensors(state, live_, "weight average (train.ema)", checkpoint);
}

std::vector<torch::Tensor> fitting_tensors(const std::vector<torch::Tensor>& stored,
                                           const std::vector<torch::Tensor>& model_tensors, const std::string& what,
                                           const std::string& checkpoint) {
  if (stored.size() != model_tensors.size()) {
    throw CheckpointError(fmt::format("{}: its {} holds {} tensors, the model has {}", checkpoint, what, stored.size(),
                                      model_tensors.size()));
  }
  std::vector<torch::Tensor> copies;
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const torch::Tensor& m = model_tensors[i];
    if (stored[i].sizes() != m.sizes() || stored[i].scalar_type() != m.scalar_type()) {
      throw CheckpointError(fmt::format("{}: tensor {} of its {} does not fit the model", checkpoint, i, what));
    }
    copies.push_back(torch::empty_like(m).copy_(stored[i]));  // in the model's memory format
  }
  return copies;
}

}  // namespace gputrain::train
