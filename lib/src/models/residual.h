#pragma once
// model.layers' `residual`: a branch whose output is added to its input (or
// to its input passed through a shortcut branch).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <optional>

#include "layers.h"

namespace gputrain::models::detail {

class ResidualImpl : public torch::nn::Module, public Hoisting {
 public:
  // `shortcut` empty (a null holder): the input is added as it is. `inline_`:
  // the branches' layers are named in the list holding the residual (it
  // hoists them); otherwise under it, as `layers.*` and `shortcut.*`.
  ResidualImpl(torch::nn::Sequential layers, torch::nn::Sequential shortcut, bool inline_ = false);

  torch::Tensor forward(torch::Tensor input);
  // A deep copy that keeps the branches' layer names, as named_sequential's does.
  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device = std::nullopt) const override;
  void pretty_print(std::ostream& stream) const override;
  bool is_serializable() const override { return !is_inline; }
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> hoisted_modules() const override;
  std::vector<std::pair<std::string, torch::Tensor>> hoisted_parameters() const override;

  torch::nn::Sequential layers{nullptr};
  torch::nn::Sequential shortcut{nullptr};
  bool is_inline = false;
};
TORCH_MODULE(Residual);

}  // namespace gputrain::models::detail
