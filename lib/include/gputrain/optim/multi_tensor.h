#pragma once
// optim.foreach and optim.fused: SGD, Adam and AdamW whose step runs as a few
// multi-tensor kernels over every parameter (ATen's _foreach_* ops, or its
// _fused_sgd_ / _fused_adam_ / _fused_adamw_ kernels, which exist on the CPU
// and on CUDA) instead of LibTorch's loop of small ops per parameter.
//
// Each derives from LibTorch's optimizer and keeps its parameter groups (each
// stepped with its own options: one kernel launch per group), options and per-
// parameter state (SGDParamState, AdamParamState, AdamWParamState), so the
// learning-rate schedule, save/load and checkpoints treat it as the original;
// the update is the same up to rounding. Adam's and AdamW's can take Muon's
// step for some groups instead (optim.muon, optim/muon.h).
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <optional>
#include <vector>

#include "gputrain/optim/muon.h"

namespace gputrain::optim::detail {

enum class StepKernel { kForeach, kFused };

// A step split in two so that a CUDA graph can capture the device half once
// and replay it: prepare_step() does the host bookkeeping of one step (step
// counts, and the learning rate and step count written into device tensors),
// launch_step() only launches kernels. step() is the two in a row.
class SplitStep {
 public:
  virtual ~SplitStep() = default;
  // Returns whether launch_step() will read every per-step value from device
  // tensors, i.e. whether a captured launch_step() stays right on replay:
  // true for the fused and the foreach kernels once every parameter has a
  // gradient and the same step count (SGD: a started momentum buffer).
  virtual bool prepare_step() = 0;
  virtual void launch_step() = 0;

  // From now on launch_step() makes no update while `found` (a float32 scalar
  // on the parameters' device, train.on_nan's check) holds 1: read on the
  // device, except by the foreach step of a first step or of parameters with
  // different step counts, which reads it on the host (a sync).
  void skip_when(torch::Tensor found) { found_ = std::move(found); }

 protected:
  // The fused kernels' found_inf: nullopt when nothing was given.
  std::optional<torch::Tensor> found_inf() const {
    return found_.defined() ? std::optional<torch::Tensor>(found_) : std::nullopt;
  }
  // For the foreach kernels with host scalars: whether this step is to be skipped (reads the device).
  bool found_on_host() const { return found_.defined() && found_.item<float>() != 0; }
  // For the foreach kernels with device scalars: zeroes `grads` where found
  // is set (masked_fill keeps a NaN out, which multiplying by 0 would not)
  // and returns 1 - found, the factor by which every later term of the
  // update is kept; undefined when nothing was given to skip on.
  torch::Tensor keep_unless_found(const std::vector<torch::Tensor>& grads) const;

 private:
  torch::Tensor found_;
};

std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_sgd(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                               const torch::optim::SGDOptions& options,
                                                               StepKernel kernel);
std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_adam(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                const torch::optim::AdamOptions& options,
                                                                StepKernel kernel, MuonGroups muon = {});
std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_adamw(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                 const torch::optim::AdamWOptions& options,
                                                                 StepKernel kernel, MuonGroups muon = {});

}  // namespace gputrain::optim::detail
