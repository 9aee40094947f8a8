#include "gputrain/checkpoint/weights.h"

#include <ATen/core/Dict.h>
#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize/input-archive.h>

#include <map>

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
    detail::copy_weights(weights_file_tensors(bytes, path), *model, path);
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

ExportSummary export_weights(const std::string& checkpoint_path, const std::string& out_path,
                             const ExportOptions& options) {
  check_output_file(out_path, {{"--checkpoint", checkpoint_path}}, options.force);
  const detail::MappedFile file(checkpoint_path);
  const std::string_view bytes = file.bytes();
  detail::NamedTensors weights;
  ExportSummary summary;
  if (is_sealed(bytes)) {
    const Checkpoint checkpoint = Checkpoint::parse(bytes, checkpoint_path);
    weights = checkpoint.weights();
    const std::vector<torch::Tensor>& average = checkpoint.state().ema;
    const bool use = use_average(options.weights, !average.empty(), checkpoint_path);
    if (use) weights = averaged(std::move(weights), average, checkpoint_path);
    summary.weights = checkpoint_weights_text(use, !average.empty());
  } else {
    summary.weights = weights_file_text(options.weights, checkpoint_path);
    weights = weights_file_tensors(bytes, checkpoint_path);
  }
  for (const auto& [name, tensor] : weights) {
    ++summary.tensors;
    summary.elements += tensor.numel();
  }
  if (options.format == WeightsFormat::kSafetensors) {
    write_atomically(out_path, safetensors_bytes({weights, {{"format", "pt"}, {"weights", summary.weights}}}));
    return summary;
  }
  write_atomically(out_path, pickle_state_dict(weights));
  return summary;
}

}  // namespace gputrain::checkpoint
