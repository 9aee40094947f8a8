#pragma once
// Parts shared by the optimizers whose step is a SplitStep (multi_tensor.cpp, muon.cpp).
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <optional>
#include <vector>

#include "gputrain/optim/multi_tensor.h"

namespace gputrain::optim::detail {

using LossClosure = torch::optim::Optimizer::LossClosure;

// Optimizer::step of a SplitStep: the closure's loss (computed with grad on,
// as LibTorch's optimizers do), then both halves of the step.
inline torch::Tensor step_with(SplitStep& split, const LossClosure& closure) {
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  torch::NoGradGuard no_grad;
  split.prepare_step();
  split.launch_step();
  return loss;
}

// A float32 device tensor the fused and foreach kernels read a per-step value from (the
// learning rate, the step count), kept at a fixed address across steps so a
// captured graph keeps pointing at it. It is written only when the value
// changes: on a small model every op per step shows.
class DeviceValue {
 public:
  // Holds `value` in `size` elements on `like`'s device (size 0: a 0-dim scalar).
  void set(const torch::Tensor& like, double value, int64_t size = 0) {
    const std::vector<int64_t> shape = size > 0 ? std::vector<int64_t>{size} : std::vector<int64_t>{};
    if (!tensor_.defined() || tensor_.device() != like.device() || tensor_.sizes() != c10::IntArrayRef(shape)) {
      tensor_ = torch::empty(shape, torch::TensorOptions().dtype(torch::kFloat32).device(like.device()));
      elements_.clear();
      written_.reset();
    }
    if (written_ != value) {
      tensor_.fill_(value);
      written_ = value;
    }
  }
  const torch::Tensor& tensor() const { return tensor_; }
  // One view per element, made once per allocation.
  const std::vector<torch::Tensor>& elements() {
    if (elements_.empty()) {
      for (int64_t i = 0; i < tensor_.numel(); ++i) elements_.push_back(tensor_[i]);
    }
    return elements_;
  }

 private:
  torch::Tensor tensor_;
  std::vector<torch::Tensor> elements_;
  std::optional<double> written_;
};

}  // namespace gputrain::optim::detail
