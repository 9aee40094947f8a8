#include "module_io.h"

#include "gputrain/common/files.h"

#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "gputrain/common/error.h"

namespace gputrain::checkpoint::detail {

namespace {
void collect(torch::serialize::InputArchive& archive, const std::string& prefix, NamedTensors& out) {
  for (const std::string& key : archive.keys()) {
    c10::IValue value;
    archive.read(key, value);
    if (value.isTensor()) {
      out.emplace_back(prefix + key, value.toTensor());
    } else if (value.isObject()) {  // a child module's archive
      torch::serialize::InputArchive child;
      archive.read(key, child);
      collect(child, prefix + key + ".", out);
    }  // anything else (the 'training' flag every archive carries) is not a weight
  }
}
}  // namespace

NamedTensors archived_tensors(torch::serialize::InputArchive& archive) {
  NamedTensors out;
  collect(archive, "", out);
  return out;
}

void write_weight_lists(torch::serialize::OutputArchive& root, const torch::nn::Module& model) {
  c10::List<std::string> names;
  c10::List<at::Tensor> tensors;
  for (const auto& p : model.named_parameters()) {
    names.push_back(p.key());
    tensors.push_back(p.value().detach());
  }
  for (const auto& b : model.named_buffers()) {
    if (!b.value().defined()) continue;
    names.push_back(b.key());
    tensors.push_back(b.value().detach());
  }
  root.write("model_names", names);
  root.write("model_tensors", tensors);
}

std::optional<NamedTensors> read_weight_lists(torch::serialize::InputArchive& root, const std::string& name) {
  c10::IValue names;
  if (!root.try_read("model_names", names)) return std::nullopt;
  c10::IValue tensors;
  if (!root.try_read("model_tensors", tensors) || !tensors.isTensorList() || !names.isList()) {
    throw CheckpointError(
        fmt::format("{}: its 'model_names' and 'model_tensors' are not a list of names and one of "
                    "tensors (not a complete checkpoint)",
                    name));
  }
  const c10::List<c10::IValue> name_list = names.toList();
  const std::vector<at::Tensor> tensor_list = tensors.toTensorVector();
  if (name_list.size() != tensor_list.size()) {
    throw CheckpointError(fmt::format("{}: holds {} weight names for {} tensors (not a complete checkpoint)", name,
                                      name_list.size(), tensor_list.size()));
  }
  NamedTensors out;
  out.reserve(tensor_list.size());
  for (std::size_t i = 0; i < tensor_list.size(); ++i) {
    const c10::IValue entry = name_list.get(i);
    if (!entry.isString()) throw CheckpointError(fmt::format("{}: weight name {} is not text", name, i));
    out.emplace_back(entry.toStringRef(), tensor_list[i]);
  }
  return out;
}

void copy_weights(const NamedTensors& archived, torch::nn::Module& model, const std::string& name) {
  std::map<std::string, torch::Tensor> stored;
  for (const auto& [key, tensor] : archived) {
    if (!stored.emplace(key, tensor).second) {
      throw CheckpointError(fmt::format("{}: holds '{}' twice (not a checkpoint gputrain wrote)", name, key));
    }
  }
  std::vector<std::pair<std::string, torch::Tensor>> targets;
  for (const auto& p : model.named_parameters()) targets.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) {
    if (b.value().defined()) targets.emplace_back(b.key(), b.value());
  }
  std::vector<std::string> held;
  for (const auto& entry : stored) held.push_back(entry.first);
  std::set<std::string> expected;
  for (const auto& [key, target] : targets) {
    expected.insert(key);
    const auto found = stored.find(key);
    if (found == stored.end()) {
      throw CheckpointError(
          fmt::format("{}: has no '{}', so these weights are for another model (the file holds {}); "
                      "check model.* against the config they were trained with",
                      name, key, fmt::join(held, ", ")));
    }
    if (found->second.sizes() != target.sizes()) {
      throw CheckpointError(
          fmt::format("{}: '{}' has shape {} but the model expects {}; check model.* and data.* "
                      "against the config the weights were trained with",
                      name, key, c10::str(found->second.sizes()), c10::str(target.sizes())));
    }
  }
  for (const auto& [key, tensor] : stored) {
    if (expected.count(key) == 0) {
      throw CheckpointError(
          fmt::format("{}: holds '{}', which the model does not have, so these weights are for "
                      "another model; check model.* against the config they were trained with",
                      name, key));
    }
  }
  torch::NoGradGuard no_grad;
  for (auto& [key, target] : targets) target.copy_(stored.at(key));
}

MappedFile::MappedFile(const std::filesystem::path& path) {
  if (const std::string problem = not_a_regular_file(path); !problem.empty()) {
    throw CheckpointError(fmt::format("{}: {}", path.string(), problem));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info {};
  if (fd < 0 || ::fstat(fd, &info) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw CheckpointError(fmt::format("{}: cannot read the file ({})", path.string(), std::strerror(error)));
  }
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ > 0) {  // an empty file maps nothing: its bytes are ""
    mapping_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping_ == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      throw CheckpointError(fmt::format("{}: cannot read the file ({})", path.string(), std::strerror(error)));
    }
    data_ = static_cast<const char*>(mapping_);
  }
  ::close(fd);  // the mapping keeps the file
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, "")),
      size_(std::exchange(other.size_, 0)),
      mapping_(std::exchange(other.mapping_, nullptr)) {}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

std::string torch_message(const c10::Error& error) {
  const std::string text = error.what_without_backtrace();
  return text.substr(0, text.find('\n'));
}

}  // namespace gputrain::checkpoint::detail
