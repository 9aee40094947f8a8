#include "gputrain/checkpoint/weights.h"

#include <sys/stat.h>

#include <ATen/core/Dict.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "module_io.h"

namespace gputrain::checkpoint {

namespace {

// A model.pt's archive, loaded onto the CPU.
torch::serialize::InputArchive weights_archive(const std::string& bytes, const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data(), bytes.size(), torch::Device(torch::kCPU));
  } catch (const c10::Error& e) {
    throw CheckpointError(fmt::format("{}: neither a gputrain checkpoint nor a LibTorch weights archive ({})", path,
                                      detail::torch_message(e)));
  }
  return archive;
}

// `state_dict` in torch.save's zip layout. torch::pickle_save would tag the
// dict with its TorchScript type (torch.jit._pickle.restore_type_tag), which
// torch.load refuses under its default weights_only=True; a plain dict of
// tensors is what a PyTorch state_dict file holds.
std::string pickle_state_dict(const c10::Dict<std::string, at::Tensor>& state_dict) {
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

}  // namespace

void save_weights(const torch::nn::Sequential& model, const std::string& path) {
  std::string bytes;
  try {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    archive.save_to([&bytes](const void* data, std::size_t size) {
      bytes.append(static_cast<const char*>(data), size);
      return size;
    });
  } catch (const c10::Error& e) {
    throw Error(ExitCode::kRuntime, fmt::format("{}: cannot write the weights: {}", path, detail::torch_message(e)));
  }
  write_atomically(path, bytes);
}

void load_weights(torch::nn::Sequential& model, const std::string& path) {
  const std::string bytes = detail::read_file(path);
  if (is_sealed(bytes)) {
    const Checkpoint checkpoint = Checkpoint::parse(bytes, path);
    checkpoint.load_model(*model);
    // A run with train.ema evaluated its weight average (parameters, then buffers): test that too.
    if (const std::vector<torch::Tensor>& average = checkpoint.state().ema; !average.empty()) {
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
  } else {
    torch::serialize::InputArchive archive = weights_archive(bytes, path);
    detail::copy_weights(detail::archived_tensors(archive), *model, path);
  }
}

ExportSummary export_weights(const std::string& checkpoint_path, const std::string& out_path) {
  // The output must not replace its own input, whatever the name: the same
  // path, a symlink to it or a hard link all share the device and inode.
  struct stat in_stat {};
  struct stat out_stat {};
  if (::stat(checkpoint_path.c_str(), &in_stat) == 0 && ::stat(out_path.c_str(), &out_stat) == 0 &&
      in_stat.st_dev == out_stat.st_dev && in_stat.st_ino == out_stat.st_ino) {
    throw UserError(
        fmt::format("--out {}: is the --checkpoint file itself ({}), which the export would replace; "
                    "write the weights to another file",
                    out_path, checkpoint_path));
  }
  const std::string bytes = detail::read_file(checkpoint_path);
  detail::NamedTensors weights;
  if (is_sealed(bytes)) {
    weights = Checkpoint::parse(bytes, checkpoint_path).weights();
  } else {
    torch::serialize::InputArchive archive = weights_archive(bytes, checkpoint_path);
    weights = detail::archived_tensors(archive);
  }
  c10::Dict<std::string, at::Tensor> state_dict;
  ExportSummary summary;
  for (const auto& [name, tensor] : weights) {
    state_dict.insert(name, tensor.detach().cpu().contiguous());
    ++summary.tensors;
    summary.elements += tensor.numel();
  }
  write_atomically(out_path, pickle_state_dict(state_dict));
  return summary;
}

}  // namespace gputrain::checkpoint
