#pragma once
// model.layers' `residual`: a branch whose output is added to its input (or
// to its input passed through a shortcut branch).
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

#include <optional>

namespace gputrain::models::detail {

class ResidualImpl : public torch::nn::Module {
 public:
  // `shortcut` empty (a null holder): the input is added as it is.
  ResidualImpl(torch::nn::Sequential layers, torch::nn::Sequential shortcut);

  torch::Tensor forward(torch::Tensor input);
  // A deep copy that keeps the branches' layer names, as named_sequential's does.
  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device = std::nullopt) const override;
  void pretty_print(std::ostream& stream) const override;

  torch::nn::Sequential layers{nullptr};
  torch::nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(Residual);

}  // namespace gputrain::models::detail
