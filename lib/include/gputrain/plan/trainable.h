#pragma once
// The model and its optimizer, assembled one way for the training run
// (train/builder.cpp), bench and the memory probe (plan/step_memory.cpp), so
// that the step each times or measures is built as the one that trains.
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/plan/model_init.h"

namespace gputrain::plan {

struct Trainable {
  torch::nn::Sequential model{nullptr};
  std::vector<optim::ParamGroup> groups;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// What it is assembled from.
struct TrainableSpec {
  const config::ModelConfig& model;          // model.*
  const config::NormalizeConfig& normalize;  // data.normalize: whitening works on normalised images
  const data::Dataset& train_set;            // the model's shape and whitening's images
  const ModelInitPlan& init;                 // model.init_from's tensors that fit, model.freeze's parameters
  const config::OptimConfig& optim;          // with fused and foreach as the fast paths decided
  bool channels_last = false;                // the fast paths' choice
  torch::Device device{torch::kCPU};
};

// model.* built on `spec.device`, its first convolution whitened, then
// model.init_from's tensors loaded (they win), model.freeze's parameters
// frozen, channels-last when chosen; `prepare` (may be empty: a strategy's
// wrapping, sync batchnorm) then sees the model before the parameter groups
// and the optimizer are made from it.
Trainable assemble_trainable(const TrainableSpec& spec,
                             const std::function<void(torch::nn::Sequential&)>& prepare = {});

}  // namespace gputrain::plan
