#include "gputrain/checkpoint/checkpoint.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <mutex>

#include "gputrain/checkpoint/format.h"
#include "gputrain/common/error.h"
#include "gputrain/device/versions.h"
#include "module_io.h"
#include "optimizer_io.h"

namespace gputrain::checkpoint {

namespace {

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

at::Generator cuda_generator(int64_t index) {
  return at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)));
}

void write_sums(OutputArchive& archive, const std::string& prefix, const PartialSums& sums) {
  if (sums.loss.defined()) archive.write(prefix + "_loss", sums.loss);
  if (sums.correct.defined()) archive.write(prefix + "_correct", sums.correct);
  archive.write(prefix + "_samples", sums.samples);
}

// Typed reads of the payload's entries; a missing or mistyped one is a
// CheckpointError naming the file and the entry.
class Reader {
 public:
  Reader(InputArchive& archive, const std::string& name) : archive_(archive), name_(name) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(fmt::format("{}: {}", name_, problem));
  }
  c10::IValue value(const std::string& key) const {
    c10::IValue v;
    if (!archive_.try_read(key, v)) fail(fmt::format("has no '{}' entry (not a complete checkpoint)", key));
    return v;
  }
  int64_t count(const std::string& key) const {
    const c10::IValue v = value(key);
    if (!v.isInt() || v.toInt() < 0) fail(fmt::format("'{}' is not a count", key));
    return v.toInt();
  }
  std::string text(const std::string& key) const {
    const c10::IValue v = value(key);
    if (!v.isString()) fail(fmt::format("'{}' is not text", key));
    return v.toStringRef();
  }
  // An optional scalar tensor whose dtype passes `check`.
  torch::Tensor scalar(const std::string& key, bool (*check)(c10::ScalarType)) const {
    c10::IValue v;
    if (!archive_.try_read(key, v)) return {};
    if (!v.isTensor() || v.toTensor().dim() != 0 || !check(v.toTensor().scalar_type())) {
      fail(fmt::format("'{}' is not a scalar of the right type", key));
    }
    return v.toTensor();
  }
  PartialSums sums(const std::string& prefix) const {
    PartialSums s;
    s.loss = scalar(prefix + "_loss", [](c10::ScalarType t) { return c10::isFloatingType(t); });
    s.correct = scalar(prefix + "_correct", [](c10::ScalarType t) { return c10::isIntegralType(t, false); });
    s.samples = count(prefix + "_samples");
    return s;
  }
  torch::Tensor rng_state(const c10::IValue& v, const std::string& what) const {
    if (!v.isTensor() || v.toTensor().dim() != 1 || v.toTensor().scalar_type() != torch::kUInt8) {
      fail(fmt::format("'{}' is not a generator state", what));
    }
    return v.toTensor();
  }
  // An optional list of tensors; empty when the entry is absent (a checkpoint of a run without the feature).
  std::vector<torch::Tensor> tensors(const std::string& key) const {
    c10::IValue v;
    if (!archive_.try_read(key, v)) return {};
    if (!v.isTensorList()) fail(fmt::format("'{}' is not a list of tensors", key));
    return v.toTensorVector();
  }
  void sub_archive(const std::string& key, InputArchive& out) const {
    c10::IValue v = value(key);
    if (!v.isObject()) fail(fmt::format("'{}' is not an archive", key));
    archive_.read(key, out);
  }

 private:
  InputArchive& archive_;
  const std::string& name_;
};

TrainingState read_state(InputArchive& archive, const std::string& name) {
  const Reader r(archive, name);
  TrainingState s;
  s.position.epoch = r.count("position_epoch");
  s.position.batch = r.count("position_batch");
  s.position.step = r.count("position_step");
  s.epoch_sums = r.sums("sums_epoch");
  s.interval_sums = r.sums("sums_interval");
  const c10::IValue scaler = r.value("scaler");
  if (!scaler.isGenericDict()) r.fail("'scaler' is not a table");
  for (const auto& entry : scaler.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isDouble())
      r.fail("'scaler' holds an entry that is not name: number");
    s.scaler[entry.key().toStringRef()] = entry.value().toDouble();
  }
  s.rng.cpu = r.rng_state(r.value("rng_cpu"), "rng_cpu");
  const c10::IValue cuda = r.value("rng_cuda");
  if (!cuda.isTensorList()) r.fail("'rng_cuda' is not a list of generator states");
  for (const at::Tensor& state : cuda.toTensorVector()) s.rng.cuda.push_back(r.rng_state(state, "rng_cuda"));
  c10::IValue best;
  if (archive.try_read("best_score", best)) {
    if (!best.isDouble()) r.fail("'best_score' is not a number");
    s.best_score = best.toDouble();
  }
  s.skipped_steps = r.count("skipped_steps");
  s.ema = r.tensors("ema");
  s.lookahead = r.tensors("lookahead");
  c10::IValue stop_best;
  if (archive.try_read("stop_best", stop_best)) {
    if (!stop_best.isDouble()) r.fail("'stop_best' is not a number");
    s.stop_best = stop_best.toDouble();
  }
  c10::IValue evals;
  if (archive.try_read("evals_since_best", evals)) s.evals_since_best = r.count("evals_since_best");
  c10::IValue evaluated;
  if (archive.try_read("evaluated_step", evaluated)) s.evaluated_step = r.count("evaluated_step");
  s.best_weights = r.tensors("best_weights");
  c10::IValue global;
  if (archive.try_read("batch_global", global)) {
    s.batch = ResolvedBatch{r.count("batch_global"), r.count("batch_accumulation"), r.count("batch_test")};
    if (s.batch->global < 1 || s.batch->accumulation < 1 || s.batch->test < 1 ||
        s.batch->global % s.batch->accumulation != 0) {
      r.fail(fmt::format("its batch ({} per step in {} micro-batches, {} per evaluation) is impossible",
                         s.batch->global, s.batch->accumulation, s.batch->test));
    }
  }
  c10::IValue data;
  if (archive.try_read("training_data", data)) s.data = r.text("training_data");
  s.config = r.text("config");
  s.torch_version = r.text("torch_version");
  s.gputrain_version = r.text("gputrain_version");
  return s;
}

}  // namespace

RngState capture_rng() {
  RngState state;
  at::Generator cpu = at::globalContext().defaultGenerator(c10::DeviceType::CPU);
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    state.cpu = cpu.get_state();
  }
  if (torch::cuda::is_available()) {
    for (int64_t i = 0; i < static_cast<int64_t>(torch::cuda::device_count()); ++i) {
      at::Generator gen = cuda_generator(i);
      std::lock_guard<std::mutex> lock(gen.mutex());
      state.cuda.push_back(gen.get_state());
    }
  }
  return state;
}

void restore_rng(const RngState& state) {
  try {
    at::Generator cpu = at::globalContext().defaultGenerator(c10::DeviceType::CPU);
    {
      std::lock_guard<std::mutex> lock(cpu.mutex());
      cpu.set_state(state.cpu);
    }
    const auto devices = torch::cuda::is_available() ? static_cast<std::size_t>(torch::cuda::device_count()) : 0;
    for (std::size_t i = 0; i < state.cuda.size() && i < devices; ++i) {
      at::Generator gen = cuda_generator(static_cast<int64_t>(i));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state.cuda[i]);
    }
  } catch (const c10::Error& e) {
    throw CheckpointError(fmt::format("the checkpoint's random generator state does not fit this LibTorch: {}",
                                      detail::torch_message(e)));
  }
}

std::string encode(const TrainingState& state, const torch::nn::Module& model,
                   const torch::optim::Optimizer& optimizer) {
  OutputArchive root;
  detail::write_weight_lists(root, model);
  detail::write_optimizer_lists(root, optimizer);
  root.write("position_epoch", state.position.epoch);
  root.write("position_batch", state.position.batch);
  root.write("position_step", state.position.step);
  write_sums(root, "sums_epoch", state.epoch_sums);
  write_sums(root, "sums_interval", state.interval_sums);
  c10::Dict<std::string, double> scaler;
  for (const auto& [key, value] : state.scaler) scaler.insert(key, value);
  root.write("scaler", scaler);
  root.write("rng_cpu", state.rng.cpu);
  root.write("rng_cuda", c10::List<at::Tensor>(state.rng.cuda));
  if (state.best_score) root.write("best_score", *state.best_score);
  root.write("skipped_steps", state.skipped_steps);
  if (!state.ema.empty()) root.write("ema", c10::List<at::Tensor>(state.ema));
  if (!state.lookahead.empty()) root.write("lookahead", c10::List<at::Tensor>(state.lookahead));
  if (state.stop_best) root.write("stop_best", *state.stop_best);
  root.write("evals_since_best", state.evals_since_best);
  root.write("evaluated_step", state.evaluated_step);
  if (!state.best_weights.empty()) root.write("best_weights", c10::List<at::Tensor>(state.best_weights));
  if (state.batch) {
    root.write("batch_global", state.batch->global);
    root.write("batch_accumulation", state.batch->accumulation);
    root.write("batch_test", state.batch->test);
  }
  if (!state.data.empty()) root.write("training_data", state.data);
  root.write("config", state.config);
  root.write("torch_version", device::torch_version());
  root.write("gputrain_version", device::version());
  std::string payload;
  root.save_to([&payload](const void* data, std::size_t size) {
    payload.append(static_cast<const char*>(data), size);
    return size;
  });
  return seal(payload);
}

Checkpoint Checkpoint::parse(std::string_view bytes, std::string name) {
  const std::string_view payload = unseal(bytes, name);
  Checkpoint c;
  c.name_ = std::move(name);
  c.payload_ = std::make_shared<const std::string>(payload);
  try {
    detail::check_pickle_lengths(*c.payload_, c.name_);
    InputArchive root;
    root.load_from(c.payload_->data(), c.payload_->size(), torch::Device(torch::kCPU));
    c.state_ = read_state(root, c.name_);
    if (detail::read_weight_lists(root, c.name_)) {  // every weight entry must read back
      if (!detail::has_optimizer_lists(root)) {
        Reader(root, c.name_).fail("has no 'optimizer_kind' entry (not a complete checkpoint)");
      }
    } else {  // format version 1: Module::save's and Optimizer::save's trees
      c.model_ = std::make_shared<InputArchive>();
      Reader(root, c.name_).sub_archive("model", *c.model_);
      InputArchive optimizer;
      Reader(root, c.name_).sub_archive("optimizer", optimizer);
      detail::archived_tensors(*c.model_);
    }
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& e) {
    throw CheckpointError(fmt::format("{}: the checksum matches but LibTorch cannot read the contents ({})", c.name_,
                                      detail::torch_message(e)));
  } catch (const std::exception& e) {
    throw CheckpointError(
        fmt::format("{}: the checksum matches but LibTorch cannot read the contents ({})", c.name_, e.what()));
  }
  return c;
}

Checkpoint Checkpoint::read(const std::filesystem::path& path) {
  return parse(detail::MappedFile(path).bytes(), path.string());
}

void Checkpoint::load_model(torch::nn::Module& model) const { detail::copy_weights(weights(), model, name_); }

void Checkpoint::load_optimizer(torch::optim::Optimizer& optimizer, const torch::Device& device) const {
  try {
    InputArchive root;
    root.load_from(payload_->data(), payload_->size(), device);
    if (detail::has_optimizer_lists(root)) {
      detail::read_optimizer_lists(root, optimizer, name_);
    } else {  // format version 1
      InputArchive archive;
      root.read("optimizer", archive);
      optimizer.load(archive);
    }
  } catch (const c10::Error& e) {
    throw CheckpointError(
        fmt::format("{}: the optimizer state does not fit the optimizer (optim.name, its parameter groups "
                    "(optim.no_decay_bias_norm, optim.bias_lr_multiplier) or the model changed?): {}",
                    name_, detail::torch_message(e)));
  }
}

std::vector<std::pair<std::string, torch::Tensor>> Checkpoint::weights() const {
  if (model_) return detail::archived_tensors(*model_);
  InputArchive root;
  root.load_from(payload_->data(), payload_->size(), torch::Device(torch::kCPU));
  return *detail::read_weight_lists(root, name_);  // parse() read them
}

}  // namespace gputrain::checkpoint
