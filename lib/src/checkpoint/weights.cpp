#include "gputrain/checkpoint/weights.h"

#include <ATen/core/Dict.h>
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize/input-archive.h>

#include <algorithm>
#include <map>
#include <set>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/checkpoint/state_dict.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "module_file.h"
#include "module_io.h"

namespace gputrain::checkpoint {

namespace {

// A model.pt's archive, loaded onto the CPU.
torch::serialize::InputArchive weights_archive(std::string_view bytes, const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    detail::check_pickle_lengths(bytes, path);
    archive.load_from(bytes.data(), bytes.size(), torch::Device(torch::kCPU));
  } catch (const c10::Error& e) {
    throw CheckpointError(fmt::format("{}: neither a gputrain checkpoint nor a LibTorch weights archive ({})", path,
                                      detail::torch_message(e)));
  }
  return archive;
}

// What every refusal of an unknown file suggests.
constexpr const char* kWeightsFiles =
    "a gputrain checkpoint, a model.pt, a state dict written by `gputrain export` or by PyTorch's "
    "torch.save(model.state_dict(), path), or a .safetensors file";

// A zip reader's view of `bytes`, which must outlive it.
std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in_memory(std::string_view bytes) {
  return std::make_shared<caffe2::serialize::MemoryReadAdapter>(bytes.data(), static_cast<off_t>(bytes.size()));
}

[[noreturn]] void not_weights(const std::string& path) {
  throw CheckpointError(
      fmt::format("{}: is not a weights file gputrain reads (not a zip archive as PyTorch writes, "
                  "a safetensors file or a gputrain checkpoint); give {}",
                  path, kWeightsFiles));
}

// A weights file of any kind (model.init_from's), whose first bytes are
// judged before the rest is read: another kind of file (a video given by
// mistake) is refused without reading its gigabytes.
detail::MappedFile weights_file(const std::string& path) {
  detail::MappedFile file(path);
  const std::string_view start = file.bytes().substr(0, 16);
  // Shorter files are judged whole, and their errors say what they lack (a checkpoint cut inside its header).
  if (start.size() == 16 && !is_sealed(start) && !is_weights_archive(path)) not_weights(path);
  return file;
}

// The tensors of a weights file that is not a checkpoint: a .safetensors
// file, a model.pt, or a state dict (torch.save's zip of a pickled dict).
detail::NamedTensors weights_file_tensors(std::string_view bytes, const std::string& path) {
  if (looks_like_safetensors(bytes)) return parse_safetensors(bytes, path).tensors;
  if (bytes.substr(0, 4) != "PK\x03\x04") not_weights(path);
  // A zip is a TorchScript module archive (model.pt: it has constants.pkl)
  // or torch.save's pickle of a dict.
  try {
    caffe2::serialize::PyTorchStreamReader zip(in_memory(bytes));
    if (!zip.hasRecord("constants.pkl")) return read_state_dict(zip, path);
  } catch (const c10::Error& e) {
    throw detail::unreadable_zip(path, e);
  }
  torch::serialize::InputArchive archive = weights_archive(bytes, path);
  return detail::archived_tensors(archive);
}

// `state_dict` in torch.save's zip layout. torch::pickle_save would tag the
// dict with its TorchScript type (torch.jit._pickle.restore_type_tag), which
// torch.load refuses under its default weights_only=True; a plain dict of
// tensors is what a PyTorch state_dict file holds.
std::string pickle_state_dict(const detail::NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> state_dict;
  for (const auto& [name, tensor] : tensors) state_dict.insert(name, tensor.detach().cpu().contiguous());
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&pickled](const char* data, std::size_t size) { pickled.insert(pickled.end(), data, data + size); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(state_dict));
  pickler.stop();
  std::string bytes;
  caffe2::serialize::PyTorchStreamWriter writer([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return bytes;
}

// The model's buffers are BatchNorm's (LibTorch's and SyncBatchNorm): no
// other module gputrain builds registers one.
bool is_buffer(const std::string& name) {
  const std::string last = name.substr(name.rfind('.') + 1);
  return last == "running_mean" || last == "running_var" || last == "num_batches_tracked";
}

// `stored` (archive order) with each tensor replaced by its train.ema average.
// The average lists the model's parameters, then its buffers, each in
// Module::parameters() order: modules in pre-order. The archive holds each
// module's parameters, its buffers, then its children's archives: the same
// pre-order, so the parameters, then the buffers, of `stored` line up with it.
detail::NamedTensors averaged(detail::NamedTensors stored, const std::vector<torch::Tensor>& average,
                              const std::string& path) {
  std::vector<torch::Tensor*> order;
  for (auto& [name, tensor] : stored) {
    if (!is_buffer(name)) order.push_back(&tensor);
  }
  for (auto& [name, tensor] : stored) {
    if (is_buffer(name)) order.push_back(&tensor);
  }
  if (order.size() != average.size()) {
    throw CheckpointError(fmt::format("{}: its weight average (train.ema) holds {} tensors, the model has {}", path,
                                      average.size(), order.size()));
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (average[i].sizes() != order[i]->sizes()) {
      throw CheckpointError(
          fmt::format("{}: tensor {} of its weight average (train.ema) does not fit the model", path, i));
    }
    *order[i] = average[i];
  }
  return stored;
}

// Whether a checkpoint's weights are replaced by its train.ema average, which
// `weights` may ask for or refuse; a CheckpointError when it asks for an average there is not.
bool use_average(ExportedWeights weights, bool has_average, const std::string& path) {
  if (weights == ExportedWeights::kAverage && !has_average) {
    throw CheckpointError(fmt::format(
        "{}: holds no weight average (the run had no train.ema, or had not updated it yet); export the live "
        "weights (--weights live)",
        path));
  }
  return weights != ExportedWeights::kLive && has_average;
}

std::string checkpoint_weights_text(bool average_used, bool has_average) {
  return average_used   ? "the train.ema weight average (what test, predict and model.pt use)"
         : !has_average ? "the live weights (the run kept no train.ema average)"
                        : "the live weights (not the train.ema average that test and model.pt use)";
}

// A model.pt, or a .safetensors file exported from one, holds one set of weights: those the run evaluated.
std::string weights_file_text(ExportedWeights weights, const std::string& path) {
  if (weights != ExportedWeights::kEvaluated) {
    throw CheckpointError(
        fmt::format("{}: is a weights file (a model.pt or .safetensors), which holds only one set of weights; "
                    "--weights live or ema needs a checkpoint file",
                    path));
  }
  return "the weights file's (it holds one set: those the run evaluated)";
}

}  // namespace

void save_weights(const torch::nn::Sequential& model, const std::string& path, std::string_view training_data) {
  std::string bytes;
  try {
    bytes = detail::module_file_bytes(*model, training_data);
  } catch (const c10::Error& e) {
    throw Error(ExitCode::kRuntime, fmt::format("{}: cannot write the weights: {}", path, detail::torch_message(e)));
  }
  write_atomically(path, bytes);
}

std::string stored_training_data(const std::string& path) {
  const detail::MappedFile file(path);
  const std::string_view bytes = file.bytes();
  if (is_sealed(bytes)) return Checkpoint::parse(bytes, path).state().data;
  if (bytes.substr(0, 4) != "PK\x03\x04") return "";  // safetensors, or a file read_weights refuses
  try {
    caffe2::serialize::PyTorchStreamReader zip(in_memory(bytes));
    if (!zip.hasRecord(detail::kTrainingDataRecord)) return "";
    const auto [data, size] = zip.getRecord(detail::kTrainingDataRecord);
    return std::string(static_cast<const char*>(data.get()), size);
  } catch (const c10::Error& e) {
    throw detail::unreadable_zip(path, e);
  }
}

std::string load_weights(torch::nn::Sequential& model, const std::string& path, ExportedWeights weights) {
  const detail::MappedFile file(path);
  const std::string_view bytes = file.bytes();
  if (!is_sealed(bytes)) {
    const std::string loaded = weights_file_text(weights, path);
    detail::NamedTensors tensors = weights_file_tensors(bytes, path);
    if (const auto renamed = rename_by_position(tensors, *model); !renamed.empty()) {
      spdlog::info("{}", renamed_text(path, renamed));
    }
    detail::copy_weights(tensors, *model, path);
    return loaded;
  }
  const Checkpoint checkpoint = Checkpoint::parse(bytes, path);
  checkpoint.load_model(*model);
  // A run with train.ema evaluated its weight average (parameters, then buffers): test that too.
  const std::vector<torch::Tensor>& average = checkpoint.state().ema;
  const bool averaged = use_average(weights, !average.empty(), path);
  if (averaged) {
    std::vector<torch::Tensor> tensors = model->parameters();
    for (const torch::Tensor& buffer : model->buffers()) tensors.push_back(buffer);
    if (average.size() != tensors.size()) {
      throw CheckpointError(fmt::format("{}: its weight average (train.ema) holds {} tensors, the model has {}", path,
                                        average.size(), tensors.size()));
    }
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (average[i].sizes() != tensors[i].sizes()) {
        throw CheckpointError(
            fmt::format("{}: tensor {} of its weight average (train.ema) does not fit the model", path, i));
      }
      tensors[i].copy_(average[i]);
    }
  }
  return checkpoint_weights_text(averaged, !average.empty());
}

NamedWeights read_weights(const std::string& path) {
  const detail::MappedFile file = weights_file(path);
  const std::string_view bytes = file.bytes();
  if (!is_sealed(bytes)) return {weights_file_tensors(bytes, path), "a weights file: one set, those it was saved with"};
  const Checkpoint checkpoint = Checkpoint::parse(bytes, path);
  const std::vector<torch::Tensor>& average = checkpoint.state().ema;
  const bool use = use_average(ExportedWeights::kEvaluated, !average.empty(), path);
  return {use ? averaged(checkpoint.weights(), average, path) : checkpoint.weights(),
          "a gputrain checkpoint: " + checkpoint_weights_text(use, !average.empty())};
}

std::vector<std::pair<std::string, std::string>> rename_by_position(
    std::vector<std::pair<std::string, torch::Tensor>>& tensors, const torch::nn::Module& model) {
  const auto last_part = [](const std::string& name) { return name.substr(name.rfind('.') + 1); };
  std::vector<std::pair<std::string, torch::Tensor>> targets;
  for (const auto& p : model.named_parameters()) targets.emplace_back(p.key(), p.value());
  const std::size_t parameters = targets.size();
  for (const auto& b : model.named_buffers()) {
    if (b.value().defined()) targets.emplace_back(b.key(), b.value());
  }
  std::set<std::string> names;
  for (const auto& [name, tensor] : targets) names.insert(name);
  const bool all_known =
      std::all_of(tensors.begin(), tensors.end(), [&](const auto& named) { return names.count(named.first) > 0; });
  if (all_known || tensors.size() != targets.size()) return {};
  // The file's parameters in order, then its buffers: a state dict interleaves them per module, a checkpoint not.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!is_buffer(tensors[i].first)) order.push_back(i);
  }
  if (order.size() != parameters) return {};
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (is_buffer(tensors[i].first)) order.push_back(i);
  }
  for (std::size_t at = 0; at < targets.size(); ++at) {
    const auto& [name, tensor] = tensors[order[at]];
    if (tensor.sizes() != targets[at].second.sizes() || last_part(name) != last_part(targets[at].first)) return {};
  }
  std::vector<std::pair<std::string, std::string>> renamed;
  for (std::size_t at = 0; at < targets.size(); ++at) {
    std::string& name = tensors[order[at]].first;
    if (name != targets[at].first) renamed.emplace_back(name, targets[at].first);
    name = targets[at].first;
  }
  return renamed;
}

std::string renamed_text(const std::string& file, const std::vector<std::pair<std::string, std::string>>& renamed) {
  std::vector<std::string> pairs;
  for (const auto& [old_name, new_name] : renamed) pairs.push_back(old_name + " -> " + new_name);
  return fmt::format(
      "{}: {} of its tensor names are not the model's, but its tensors line up with the model's one for one (the "
      "same network under other layer names, e.g. from before the configs took torchvision's names); read by "
      "position: {}",
      file, renamed.size(), fmt::join(pairs, ", "));
}

void load_named_weights(torch::nn::Module& model, const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::map<std::string, torch::Tensor> targets;
  for (const auto& p : model.named_parameters()) targets.emplace(p.key(), p.value());
  for (const auto& b : model.named_buffers()) targets.emplace(b.key(), b.value());
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    const auto found = targets.find(name);
    GPUTRAIN_CHECK(found != targets.end() && found->second.sizes() == tensor.sizes(),
                   "'{}' was matched to the model by name and shape, which it does not have", name);
    found->second.copy_(tensor);
  }
}

std::string state_dict_bytes(const torch::nn::Module& model) {
  detail::NamedTensors tensors;
  for (const auto& p : model.named_parameters()) tensors.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) {
    if (b.value().defined()) tensors.emplace_back(b.key(), b.value());
  }
  return pickle_state_dict(tensors);
}

std::string state_dict_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  return pickle_state_dict(tensors);
}

ChosenWeights read_chosen_weights(const std::string& path, ExportedWeights which) {
  const detail::MappedFile file(path);
  const std::string_view bytes = file.bytes();
  ChosenWeights chosen;
  if (is_sealed(bytes)) {
    const Checkpoint checkpoint = Checkpoint::parse(bytes, path);
    chosen.tensors = checkpoint.weights();
    const std::vector<torch::Tensor>& average = checkpoint.state().ema;
    const bool use = use_average(which, !average.empty(), path);
    if (use) chosen.tensors = averaged(std::move(chosen.tensors), average, path);
    chosen.weights = checkpoint_weights_text(use, !average.empty());
    return chosen;
  }
  chosen.weights = weights_file_text(which, path);
  chosen.tensors = weights_file_tensors(bytes, path);
  return chosen;
}

}  // namespace gputrain::checkpoint
