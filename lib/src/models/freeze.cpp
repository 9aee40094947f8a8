#include "gputrain/models/freeze.h"

#include <torch/nn/modules/batchnorm.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

#include "gputrain/common/error.h"
#include "gputrain/models/factory.h"
#include "sync_batchnorm.h"

namespace gputrain::models {

namespace {

bool is_batchnorm(const torch::nn::Module& module) {
  return module.as<torch::nn::BatchNorm1dImpl>() != nullptr || module.as<torch::nn::BatchNorm2dImpl>() != nullptr ||
         module.as<detail::SyncBatchNormImpl>() != nullptr;
}

}  // namespace

bool under_prefix(const std::string& name, const std::string& prefix) {
  return name.rfind(prefix, 0) == 0 && (name.size() == prefix.size() || name[prefix.size()] == '.');
}

void freeze(torch::nn::Module& model, const std::vector<std::string>& prefixes) {
  for (auto& p : model.named_parameters()) {
    const bool frozen = std::any_of(prefixes.begin(), prefixes.end(),
                                    [&](const std::string& prefix) { return under_prefix(p.key(), prefix); });
    if (frozen) p.value().set_requires_grad(false);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> trainable_parameters(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters()) {
    if (p.value().requires_grad()) out.emplace_back(p.key(), p.value());
  }
  return out;
}

void train_mode(torch::nn::Module& model, config::FrozenBatchnorm frozen_batchnorm) {
  model.train();
  if (frozen_batchnorm == config::FrozenBatchnorm::kTrain) return;
  for (const auto& module : model.modules(/*include_self=*/false)) {
    if (!is_batchnorm(*module)) continue;
    const std::vector<torch::Tensor> params = module->parameters();
    const bool frozen = !params.empty() && std::none_of(params.begin(), params.end(),
                                                        [](const torch::Tensor& p) { return p.requires_grad(); });
    if (frozen) module->eval();
  }
}

std::string batchnorm_of_single_values(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape) {
  std::vector<std::string> training;  // read before tracing, which puts the whole model back in one mode
  for (const auto& layer : model->named_modules("", /*include_self=*/false)) {
    if (is_batchnorm(*layer.value()) && layer.value()->is_training()) training.push_back(layer.key());
  }
  if (training.empty()) return "";
  std::map<std::string, std::vector<int64_t>> shapes;  // a layer's output: a batchnorm's input shape too
  for (const LayerRow& row : trace_layers(model, sample_shape)) shapes.emplace(row.name, row.output_shape);
  for (const std::string& name : training) {
    const auto shape = shapes.find(name);
    if (shape == shapes.end() || shape->second.empty()) continue;
    const int64_t per_channel =
        std::accumulate(shape->second.begin() + 1, shape->second.end(), int64_t{1}, std::multiplies<>());
    if (per_channel == 1) return name;
  }
  return "";
}

void mirror_training_state(const torch::nn::Module& model, torch::nn::Module& copy) {
  const std::vector<torch::Tensor> from = model.parameters();
  std::vector<torch::Tensor> to = copy.parameters();
  GPUTRAIN_CHECK(from.size() == to.size(), "a replica with {} parameters for a model of {}", to.size(), from.size());
  for (std::size_t i = 0; i < from.size(); ++i) to[i].set_requires_grad(from[i].requires_grad());
  const auto modules = model.modules();
  const auto copies = copy.modules();
  GPUTRAIN_CHECK(modules.size() == copies.size(), "a replica with {} modules for a model of {}", copies.size(),
                 modules.size());
  // Module::train() recurses into the children; in pre-order, each module's
  // own call comes after its parent's and settles its flag.
  for (std::size_t i = 0; i < modules.size(); ++i) copies[i]->train(modules[i]->is_training());
}

}  // namespace gputrain::models
