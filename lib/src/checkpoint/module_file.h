#pragma once
// model.pt: a module's weights in the file torch::save(module, path) writes,
// which torch::load(module, path) and torch.jit.load read, written in one pass.
#include <torch/nn/module.h>

#include <string>
#include <string_view>

namespace gputrain::checkpoint::detail {

// Where model.pt keeps the description of its training data: an extra file,
// as torch.jit.save(..., _extra_files=...) writes them, which Python reads with
// torch.jit.load(path, _extra_files={"gputrain_training_data.json": ""}).
inline constexpr const char* kTrainingDataRecord = "extra/gputrain_training_data.json";

// The bytes of that file for `model` (its tensors copied to the CPU), with
// `training_data` in kTrainingDataRecord unless it is empty.
// LibTorch's own writer, Module::save into an OutputArchive, gives every
// module a TorchScript class of its own and looks each new entry up among its
// siblings and each class among all earlier ones: time in n squared for n
// layers (100,000 layers: over 5 minutes). This writes the same archive
// directly: one class per distinct module layout and no lookups.
std::string module_file_bytes(const torch::nn::Module& model, std::string_view training_data = {});

}  // namespace gputrain::checkpoint::detail
