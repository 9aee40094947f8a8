#pragma once
// Pieces shared by checkpoints and plain weights files (model.pt): both keep a
// model's tensors in Module::save's layout, a tree of archives.
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/serialize/input-archive.h>

#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain::checkpoint::detail {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Every tensor in `archive` and its sub-archives, by dotted name ("fc1.weight").
NamedTensors archived_tensors(torch::serialize::InputArchive& archive);

// A model's parameters and buffers as two lists in `root`: "model_names"
// (dotted) and "model_tensors". Module::save gives each module an archive of
// its own inside its parent's, and LibTorch looks every entry added to or read
// from an archive up among those before it (ClassType::findAttributeSlot), so
// a Sequential of n layers took time in n squared to write and to read
// (20,000 layers: 6.6 s); the lists take one pass.
void write_weight_lists(torch::serialize::OutputArchive& root, const torch::nn::Module& model);
// The lists write_weight_lists wrote; nullopt when `root` has none (a
// checkpoint of format version 1, whose "model" entry is Module::save's tree).
// CheckpointError when they are malformed; `name` (the file) begins it.
std::optional<NamedTensors> read_weight_lists(torch::serialize::InputArchive& root, const std::string& name);

// Copies `stored` into `model` after checking that the names and shapes
// match both ways: Module::load would silently reshape parameters to
// whatever the file holds. `name` (the file) begins every error.
void copy_weights(const NamedTensors& stored, torch::nn::Module& model, const std::string& name);

// LibTorch's unpickler sizes each string by the length its opcode declares
// before reading the bytes (Unpickler::readBytes), so four crafted bytes in a
// file of kilobytes make it reserve up to 4 GiB. Every pickle in the zip
// `archive` is walked first, as LibTorch would read it (it grows its memo to
// any slot a pickle names, too), and a length running past its record, a memo
// slot beyond it, or a record declaring more bytes than the archive holds, is
// a CheckpointError beginning with `name`. A zip LibTorch
// cannot open throws its c10::Error, for the caller to word.
void check_pickle_lengths(std::string_view archive, const std::string& name);

// A file's bytes, mapped into memory rather than read: only the pages that are
// used are read, so a file is judged without holding all of it (20 GB of a
// sparse file behind a valid safetensors header or a zip's magic were read
// whole, and the kernel ended the process for memory). CheckpointError when it
// is missing, not a regular file, or unreadable.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile& operator=(MappedFile&&) = delete;

  std::string_view bytes() const { return {data_, size_}; }

 private:
  const char* data_ = "";
  std::size_t size_ = 0;
  void* mapping_ = nullptr;
};

// LibTorch's message without its backtrace, first line only.
std::string torch_message(const c10::Error& error);

}  // namespace gputrain::checkpoint::detail
