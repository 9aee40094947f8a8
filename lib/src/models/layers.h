#pragma once
// What every model builder shares: the Sequential that keeps its layer names
// when cloned, and the sizes a model takes from the data set and the config.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/models/factory.h"

namespace gputrain::models::detail {

// An empty Sequential whose clone() keeps the layer names. The stock
// SequentialImpl::clone renumbers the layers "0", "1", ..., which changes the
// checkpoint keys and breaks nn::parallel::replicate, which looks a replica's
// layers up by the original's names. Layers go in with add_layer.
torch::nn::Sequential named_sequential();

// What named_sequential() holds. Its forward takes and gives one tensor, so a
// list can be a layer of another (model.layers' sequential) inside an AnyModule.
class NamedSequentialImpl : public torch::nn::SequentialImpl {
 public:
  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device = std::nullopt) const override;
  torch::Tensor forward(torch::Tensor input) { return SequentialImpl::forward(std::move(input)); }

  std::set<std::string> hoisted;  // children its layers hoisted into it (add_layer), which are not its layers
};

// A layer whose modules or parameters the list holding it registers under
// their own names, not under the layer's: an inline residual's layers
// (torchvision's `layer1.0.conv1`, not `layer1.0.res1.layers.conv1`). The
// layer itself registers none of them, so each tensor has one name, and
// is not serializable (the list saves them).
class Hoisting {
 public:
  virtual ~Hoisting() = default;
  virtual std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> hoisted_modules() const { return {}; }
  virtual std::vector<std::pair<std::string, torch::Tensor>> hoisted_parameters() const { return {}; }
};

// Appends `layer` under `name` to `list` (a named_sequential()), and registers what it hoists.
void add_layer(torch::nn::Sequential& list, const std::string& name, torch::nn::AnyModule layer);

// `list`'s layers in order with the names they were added under: its named
// children less the modules its layers hoisted into it.
std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> named_layers(const torch::nn::Sequential& list);

// The number of values in one flattened sample, checked against
// model.in_features (a ConfigError naming both numbers when they differ).
int64_t checked_inputs(const config::ModelConfig& config, const ModelShape& shape);

// The data set's outputs (model.out_features must agree when set), or
// model.out_features for unlabeled data (outputs == 0).
int64_t outputs(const config::ModelConfig& config, const ModelShape& shape);

// The module's pretty print without "torch::nn::": "Conv2d(3, 6, kernel_size=[5, 5], stride=[1, 1])".
std::string pretty(const torch::nn::Module& module);

// Calls `trace` with a zero sample [1, sample_shape...] on the model's device,
// the model in eval mode under no-grad (so no random number is drawn), and
// restores the model's mode after, also when `trace` throws.
void trace_zero_sample(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape,
                       const std::function<void(torch::Tensor&)>& trace);

// Appends a "flatten" layer when a sample has more than one dimension.
void flatten_if_needed(torch::nn::Sequential& model, const ModelShape& shape);

torch::nn::Sequential make_linear(const config::ModelConfig& config, const ModelShape& shape);
torch::nn::Sequential make_mlp(const config::ModelConfig& config, const ModelShape& shape);
torch::nn::Sequential make_cifar_cnn(const config::ModelConfig& config, const ModelShape& shape);
// model.layers (declared.cpp).
torch::nn::Sequential make_declared(const config::ModelConfig& config, const ModelShape& shape);

}  // namespace gputrain::models::detail
