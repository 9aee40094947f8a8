#pragma once
// model.pt: a module's weights in the file torch::save(module, path) writes,
// which torch::load(module, path) and torch.jit.load read, written in one pass.
#include <torch/nn/module.h>

#include <string>

namespace gputrain::checkpoint::detail {

// The bytes of that file for `model` (its tensors copied to the CPU).
// LibTorch's own writer, Module::save into an OutputArchive, gives every
// module a TorchScript class of its own and looks each new entry up among its
// siblings and each class among all earlier ones: time in n squared for n
// layers (100,000 layers: over 5 minutes). This writes the same archive
// directly: one class per distinct module layout and no lookups.
std::string module_file_bytes(const torch::nn::Module& model);

}  // namespace gputrain::checkpoint::detail
