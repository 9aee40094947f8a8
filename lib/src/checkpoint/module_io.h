#pragma once
// Pieces shared by checkpoints and plain weights files (model.pt): both keep a
// model's tensors in Module::save's layout, a tree of archives.
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/serialize/input-archive.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace gputrain::checkpoint::detail {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Every tensor in `archive` and its sub-archives, by dotted name ("fc1.weight").
NamedTensors archived_tensors(torch::serialize::InputArchive& archive);

// Copies the tensors of `archive` into `model` after checking that the names
// and shapes match both ways: Module::load would silently reshape parameters
// to whatever the file holds. `name` (the file) begins every error.
void copy_weights(torch::serialize::InputArchive& archive, torch::nn::Module& model, const std::string& name);

// A file's bytes; CheckpointError when it is missing or unreadable.
std::string read_file(const std::filesystem::path& path);

// LibTorch's message without its backtrace, first line only.
std::string torch_message(const c10::Error& error);

}  // namespace gputrain::checkpoint::detail
