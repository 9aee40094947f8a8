#include "residual.h"

namespace gputrain::models::detail {

namespace {
torch::nn::Sequential cloned(const torch::nn::Sequential& branch, const std::optional<torch::Device>& device) {
  if (branch.is_empty()) return torch::nn::Sequential(nullptr);
  return torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(branch->clone(device)));
}
}  // namespace

ResidualImpl::ResidualImpl(torch::nn::Sequential layers_, torch::nn::Sequential shortcut_)
    : layers(register_module("layers", std::move(layers_))) {
  if (!shortcut_.is_empty()) shortcut = register_module("shortcut", std::move(shortcut_));
}

torch::Tensor ResidualImpl::forward(torch::Tensor input) {
  torch::Tensor branch = layers->forward(input);
  return branch + (shortcut.is_empty() ? input : shortcut->forward(input));
}

std::shared_ptr<torch::nn::Module> ResidualImpl::clone(const std::optional<torch::Device>& device) const {
  auto copy = std::make_shared<ResidualImpl>(cloned(layers, device), cloned(shortcut, device));
  copy->train(is_training());
  return copy;
}

void ResidualImpl::pretty_print(std::ostream& stream) const {
  stream << (shortcut.is_empty() ? "Residual(layers + input)" : "Residual(layers + shortcut)");
}

}  // namespace gputrain::models::detail
