#include "residual.h"

namespace gputrain::models::detail {

namespace {
torch::nn::Sequential cloned(const torch::nn::Sequential& branch, const std::optional<torch::Device>& device) {
  if (branch.is_empty()) return torch::nn::Sequential(nullptr);
  return torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(branch->clone(device)));
}
}  // namespace

ResidualImpl::ResidualImpl(torch::nn::Sequential layers_, torch::nn::Sequential shortcut_, bool inline_)
    : layers(std::move(layers_)), shortcut(std::move(shortcut_)), is_inline(inline_) {
  if (is_inline) return;  // the list holding it registers the branches' layers
  register_module("layers", layers);
  if (!shortcut.is_empty()) register_module("shortcut", shortcut);
}

torch::Tensor ResidualImpl::forward(torch::Tensor input) {
  torch::Tensor branch = layers->forward(input);
  return branch + (shortcut.is_empty() ? input : shortcut->forward(input));
}

std::shared_ptr<torch::nn::Module> ResidualImpl::clone(const std::optional<torch::Device>& device) const {
  auto copy = std::make_shared<ResidualImpl>(cloned(layers, device), cloned(shortcut, device), is_inline);
  copy->train(is_training());
  return copy;
}

void ResidualImpl::pretty_print(std::ostream& stream) const {
  stream << (shortcut.is_empty() ? "Residual(layers + input)" : "Residual(layers + shortcut)");
}

// Every child and own parameter of both branches (what their own layers hoisted included).
std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> ResidualImpl::hoisted_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> modules;
  if (!is_inline) return modules;
  for (const auto* branch : {&layers, &shortcut}) {
    if (branch->is_empty()) continue;
    for (const auto& child : (*branch)->named_children()) modules.emplace_back(child.key(), child.value());
  }
  return modules;
}

std::vector<std::pair<std::string, torch::Tensor>> ResidualImpl::hoisted_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
  if (!is_inline) return parameters;
  for (const auto* branch : {&layers, &shortcut}) {
    if (branch->is_empty()) continue;
    for (const auto& p : (*branch)->named_parameters(/*recurse=*/false)) parameters.emplace_back(p.key(), p.value());
  }
  return parameters;
}

}  // namespace gputrain::models::detail
