#include "gputrain/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "gputrain/common/error.h"
#include "gputrain/data/batch_stream.h"
#include "gputrain/device/memory.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/logging/format.h"
#include "gputrain/models/factory.h"
#include "gputrain/train/amp.h"
#include "gputrain/train/cuda_graph.h"
#include "gputrain/train/fast_paths.h"
#include "gputrain/train/optim.h"

namespace gputrain::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Module::save nests each child module as a sub-archive: "conv1.weight" is
// "weight" inside "conv1".
bool read_nested(torch::serialize::InputArchive& archive, const std::string& name, torch::Tensor& out,
                 bool is_buffer) {
  const auto dot = name.find('.');
  if (dot == std::string::npos) return archive.try_read(name, out, is_buffer);
  torch::serialize::InputArchive child;
  if (!archive.try_read(name.substr(0, dot), child)) return false;
  return read_nested(child, name.substr(dot + 1), out, is_buffer);
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// Loss and correct-prediction sums that stay on the device between log
// intervals, so the loop never waits on the GPU for a number it won't print.
struct RunningSums {
  torch::Tensor loss;
  torch::Tensor correct;
  int64_t samples = 0;

  void add(const torch::Tensor& batch_loss_sum, const torch::Tensor& batch_correct, int64_t batch_samples) {
    loss = loss.defined() ? loss + batch_loss_sum : batch_loss_sum;
    if (batch_correct.defined()) correct = correct.defined() ? correct + batch_correct : batch_correct;
    samples += batch_samples;
  }
  // Syncs with the device; under ddp, sums over every rank.
  EvalResult collect(bool classification, parallel::Strategy& strategy) const {
    const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(strategy.device());
    torch::Tensor totals = torch::zeros({3}, options);
    if (loss.defined()) totals[0] = loss.to(torch::kFloat64);
    if (correct.defined()) totals[1] = correct.to(torch::kFloat64);
    totals[2] = static_cast<double>(samples);
    strategy.all_reduce_sum(totals);
    const torch::Tensor host = totals.cpu();
    const double* values = host.data_ptr<double>();
    EvalResult r;
    r.classification = classification;
    r.loss_sum = values[0];
    r.correct = static_cast<int64_t>(values[1]);
    r.samples = static_cast<int64_t>(values[2]);
    return r;
  }
};

torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification) {
  if (!classification) return {};
  return outputs.argmax(1).eq(targets).sum();
}

// One pass over `stream` in eval mode under no-grad; leaves the model in eval mode.
EvalResult run_evaluation(torch::nn::Sequential& model, data::BatchSource& stream, parallel::Strategy& strategy,
                          LossKind loss, bool classification, AmpMode amp) {
  torch::NoGradGuard no_grad;
  model->eval();
  RunningSums sums;
  stream.start_epoch(0);
  const c10::DeviceType device_type = strategy.device().type();
  const parallel::ThreadSetup autocast_replica = [amp, device_type] {
    return std::make_shared<AutocastScope>(amp, device_type);
  };
  while (auto batch = stream.next()) {
    const data::Batch local = strategy.local_part(*batch);
    const torch::Tensor targets = local.targets.to(strategy.device(), /*non_blocking=*/true);
    AutocastScope autocast(amp, device_type);
    const torch::Tensor outputs = strategy.forward(model, local.inputs, autocast_replica);
    sums.add(loss_sum(loss, outputs, targets), correct_count(outputs, targets, classification), local.size());
  }
  return sums.collect(classification, strategy);
}

// The next training batch, inside the "data" range of a profile.
std::optional<data::Batch> next_batch(data::BatchSource& source) {
  device::NvtxRange range("data");
  return source.next();
}

}  // namespace

struct Trainer::State {
  config::ExperimentConfig config;
  config::SourceMap sources;
  device::DevicePlan devices;
  std::unique_ptr<parallel::Strategy> strategy;
  torch::Device device{torch::kCPU};
  std::shared_ptr<const data::Dataset> train_set;
  std::shared_ptr<const data::Dataset> test_set;  // null for unlabeled data
  std::unique_ptr<data::BatchSource> train_stream;
  std::unique_ptr<data::BatchSource> test_stream;
  torch::nn::Sequential model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  LossKind loss = LossKind::kCrossEntropy;
  bool classification = true;
  int64_t accumulation = 1;
  AmpMode amp = AmpMode::kOff;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<GraphedStep> graphed;  // train.cuda_graph, where the run allows it
  int64_t steps_per_epoch = 0;
  int64_t step = 0;

  void run_optimizer_step(const std::vector<data::Batch>& group, RunningSums& epoch_sums, RunningSums& interval);
  EvalResult train_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start, double& epoch_s);
  void forward_only_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start);
  EvalResult evaluate();
};

Trainer::Trainer(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                 const parallel::LaunchInfo& launch)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.config = loaded.config;
  s.sources = loaded.sources;
  s.devices = devices;
  const config::ExperimentConfig& c = s.config;
  const parallel::StrategyPlan plan = parallel::plan_strategy(loaded, devices, launch);
  s.strategy = parallel::make_strategy(plan, c, launch);
  s.device = s.strategy->device();
  spdlog::info("strategy: {} ({})", s.strategy->describe(), plan.reason);

  s.amp = parse_amp_mode(c.train.amp);
  check_amp_device(s.amp, s.device.type(), loaded.sources.at("train.amp"));
  s.scaler = std::make_unique<GradScaler>(GradScalerOptions().enabled(s.amp == AmpMode::kFp16));
  s.accumulation = c.train.accumulation_steps;
  if (c.data.batch_size % s.accumulation != 0) {
    throw ConfigError(loaded.sources.at("data.batch_size"), "data.batch_size",
                      fmt::format("{} is not divisible by train.accumulation_steps ({}); batch_size is the batch per "
                                  "optimizer step and each micro-batch takes an equal share",
                                  c.data.batch_size, s.accumulation));
  }
  config::DataConfig micro = c.data;
  micro.batch_size = c.data.batch_size / s.accumulation;

  torch::manual_seed(c.seed);
  s.train_set = data::make_dataset(c.data, data::Split::kTrain, c.seed);
  const data::DatasetInfo& info = s.train_set->info();
  s.train_stream = data::make_batch_source(s.train_set, data::loader_options(micro, data::Split::kTrain, c.seed),
                                           c.data.device_cache, s.device);
  if (info.target_kind != data::TargetKind::kNone) {
    s.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed);
    s.test_stream = data::make_batch_source(s.test_set, data::loader_options(c.data, data::Split::kTest, c.seed),
                                            c.data.device_cache, s.device);
  }
  s.classification = info.target_kind == data::TargetKind::kClasses;
  if (info.target_kind != data::TargetKind::kNone) {
    try {
      s.loss = resolve_loss(c.train.loss, s.classification);
    } catch (const ConfigError& e) {
      throw ConfigError(loaded.sources.at("train.loss"), e.key(), e.what());
    }
  }

  s.model = models::make_model(c.model, models::model_shape(info, c.model));
  s.model->to(s.device);
  if (c.train.channels_last) to_channels_last(s.model);
  configure_backends(c.train, s.device);
  s.strategy->prepare(s.model);

  s.optimizer = make_optimizer(c.optim, s.model->parameters());
  if (c.train.cuda_graph) {
    const std::string blocker =
        cuda_graph_blocker(c, s.device, plan.kind == parallel::StrategyKind::kSingle, info.samples);
    if (blocker.empty()) {
      s.graphed = std::make_unique<GraphedStep>(s.model, *s.optimizer, s.loss, s.classification,
                                                c.train.channels_last, s.device);
    } else {
      spdlog::warn("train.cuda_graph: off because {}; steps run eagerly", blocker);
    }
  }
  s.steps_per_epoch = (s.train_stream->batches_per_epoch() + s.accumulation - 1) / s.accumulation;
  s.schedule = std::make_unique<LrSchedule>(c.optim, s.steps_per_epoch, s.steps_per_epoch * c.train.epochs);

  spdlog::info("data: {} from {}: {} training samples{}, input {}, {}", info.name, info.source, info.samples,
               s.test_set ? fmt::format(", {} test samples", s.test_set->info().samples) : "",
               fmt::join(info.input_shape, "x"),
               s.classification ? fmt::format("{} classes", info.classes)
               : info.target_kind == data::TargetKind::kValues ? fmt::format("{} regression targets", info.targets)
                                                               : "no labels");
  spdlog::info("batch: {} samples per optimizer step{}; {} steps per epoch", c.data.batch_size,
               s.accumulation > 1 ? fmt::format(" (micro-batch {} x {} accumulation steps)", micro.batch_size,
                                                s.accumulation)
                                  : "",
               s.steps_per_epoch);
  spdlog::info("model: {}, {} parameters", c.model.name, models::parameter_count(*s.model));
  for (const auto& line : models::layer_summary(s.model)) spdlog::info("  {}", line);
  spdlog::info("precision: {}{}{}", s.amp == AmpMode::kOff ? "fp32" : "autocast " + std::string(to_string(s.amp)),
               s.scaler->enabled() ? fmt::format(", gradient scaler from {}", s.scaler->scale()) : "",
               c.train.grad_clip > 0 ? fmt::format(", gradients clipped to norm {}", c.train.grad_clip) : "");
  spdlog::info("optimizer: {} lr {} (scheduler {}), loss {}", c.optim.name, c.optim.lr, c.optim.scheduler,
               info.target_kind == data::TargetKind::kNone ? "none (forward passes only)"
               : s.loss == LossKind::kCrossEntropy         ? "cross_entropy"
                                                           : "mse");
}

Trainer::~Trainer() = default;

torch::nn::Sequential Trainer::model() const { return state_->model; }

void Trainer::State::run_optimizer_step(const std::vector<data::Batch>& group, RunningSums& epoch_sums,
                                        RunningSums& interval) {
  int64_t group_samples = 0;
  for (const auto& mb : group) group_samples += mb.size();
  schedule->apply(*optimizer, step);
  if (graphed) {
    const StepSums sums = graphed->step(group.front());  // one micro-batch: cuda_graph_blocker saw to it
    epoch_sums.add(sums.loss_sum, sums.correct, group_samples);
    interval.add(sums.loss_sum, sums.correct, group_samples);
    ++step;
    return;
  }
  optimizer->zero_grad();
  // Autocast is thread-local: replica threads open their own scope.
  const parallel::ThreadSetup autocast_replica = [this] {
    return std::make_shared<AutocastScope>(amp, device.type());
  };
  for (const auto& global : group) {
    const data::Batch mb = strategy->local_part(global);
    torch::Tensor outputs;
    torch::Tensor batch_loss;
    torch::Tensor targets = mb.targets.to(device, /*non_blocking=*/true);
    {
      device::NvtxRange range("forward");
      AutocastScope autocast(amp, device.type());  // the forward pass and the loss
      outputs = strategy->forward(model, model_inputs(mb.inputs, device, config.train.channels_last),
                                  autocast_replica);
      batch_loss = loss_sum(loss, outputs, targets);
    }
    // Dividing by the whole (global) group's size makes K micro-batches, or N
    // ranks, one step of their combined batch, and weights a short last group
    // by its real size.
    {
      device::NvtxRange range("backward");
      scaler->scale(batch_loss / static_cast<double>(group_samples)).backward();
    }
    const torch::Tensor detached = batch_loss.detach();
    const torch::Tensor correct = correct_count(outputs.detach(), targets, classification);
    epoch_sums.add(detached, correct, mb.size());
    interval.add(detached, correct, mb.size());
  }
  device::NvtxRange range("optimizer");
  strategy->after_backward(model);
  if (config.train.grad_clip > 0) {
    scaler->unscale_(*optimizer);  // clip the true gradients, not the scaled ones
    clip_grad_norm(model->parameters(), config.train.grad_clip);
  }
  if (!scaler->step(*optimizer)) {
    spdlog::warn("step {}: inf/NaN gradients under fp16; step skipped, loss scale backs off from {}", step + 1,
                 scaler->scale());
  }
  scaler->update();
  ++step;
}

EvalResult Trainer::State::train_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start,
                                       double& epoch_s) {
  model->train();
  train_stream->start_epoch(epoch - 1);
  const auto epoch_start = Clock::now();
  auto interval_start = epoch_start;
  RunningSums epoch_sums;
  RunningSums interval;
  std::vector<data::Batch> group;
  Progress progress{epoch, config.train.epochs, 0, train_stream->batches_per_epoch(), 0, 0, 0};
  auto flush_group = [&] {
    run_optimizer_step(group, epoch_sums, interval);
    group.clear();
    if (step % config.train.log_every != 0) return;
    const EvalResult r = interval.collect(classification, *strategy);
    const double interval_s = seconds_since(interval_start);
    StepMetrics m{epoch,
                  step,
                  r.mean_loss(),
                  r.accuracy(),
                  interval_s > 0 ? r.samples / interval_s : 0.0,
                  schedule->lr_at(step - 1),
                  seconds_since(run_start),
                  scaler->scale(),
                  scaler->skipped_steps()};
    progress.last_loss = m.loss;
    observer.on_step(m);
    interval = RunningSums{};
    interval_start = Clock::now();
  };
  while (auto batch = next_batch(*train_stream)) {
    progress.samples += batch->size();
    group.push_back(std::move(*batch));
    if (static_cast<int64_t>(group.size()) == accumulation) flush_group();
    ++progress.batch;
    progress.epoch_elapsed_s = seconds_since(epoch_start);
    observer.on_progress(progress);
  }
  if (!group.empty()) flush_group();  // the epoch's last, shorter group still steps
  const EvalResult result = epoch_sums.collect(classification, *strategy);
  epoch_s = seconds_since(epoch_start);
  return result;
}

void Trainer::State::forward_only_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start) {
  torch::NoGradGuard no_grad;
  model->eval();
  train_stream->start_epoch(epoch - 1);
  const auto epoch_start = Clock::now();
  int64_t samples = 0;
  while (auto batch = train_stream->next()) {
    const data::Batch local = strategy->local_part(*batch);
    const torch::Tensor outputs = strategy->forward(model, local.inputs, {});
    samples += local.size();
    spdlog::debug("forward: input {} output {}", logging::shape_str(local.inputs), logging::shape_str(outputs));
  }
  EpochMetrics m;
  m.epoch = epoch;
  m.train.samples = samples;
  m.train.classification = false;
  m.epoch_s = seconds_since(epoch_start);
  m.samples_per_s = m.epoch_s > 0 ? samples / m.epoch_s : 0.0;
  m.elapsed_s = seconds_since(run_start);
  observer.on_epoch(m);
}

EvalResult Trainer::State::evaluate() {
  const EvalResult result = run_evaluation(model, *test_stream, *strategy, loss, classification, amp);
  model->train();
  return result;
}

EvalResult Trainer::evaluate() {
  if (!state_->test_stream) throw UserError("the data set has no labels, so there is nothing to evaluate");
  return state_->evaluate();
}

TrainSummary Trainer::fit(TrainObserver& observer) {
  State& s = *state_;
  const auto run_start = Clock::now();
  TrainSummary summary;
  const bool labeled = s.test_stream != nullptr;
  for (int64_t epoch = 1; epoch <= s.config.train.epochs; ++epoch) {
    if (!labeled) {
      s.forward_only_epoch(epoch, observer, run_start);
      summary.epochs = epoch;
      continue;
    }
    device::reset_peak_memory(s.device);
    EpochMetrics m;
    m.epoch = epoch;
    m.train = s.train_epoch(epoch, observer, run_start, m.epoch_s);
    m.step = s.step;
    m.samples_per_s = m.epoch_s > 0 ? m.train.samples / m.epoch_s : 0.0;
    m.lr = s.schedule->lr_at(std::max<int64_t>(s.step - 1, 0));
    m.loss_scale = s.scaler->scale();
    m.skipped_steps = s.scaler->skipped_steps();
    m.test = s.evaluate();
    m.has_test = true;
    m.elapsed_s = seconds_since(run_start);
    if (s.device.is_cuda()) {
      const device::MemoryStats mem = device::memory_stats(s.device);
      m.cuda = true;
      m.memory_allocated = mem.allocated;
      m.memory_reserved = mem.reserved;
      m.memory_peak = mem.peak_allocated;
    }
    observer.on_epoch(m);
    spdlog::info("Epoch {}/{}: train loss {:.4f}{}, {:.0f} samples/s, {:.1f} s{}{}", epoch, s.config.train.epochs,
                 m.train.mean_loss(),
                 s.classification ? fmt::format(", accuracy {:.2f}%", 100.0 * m.train.accuracy()) : "",
                 m.samples_per_s, m.epoch_s,
                 s.scaler->enabled()
                     ? fmt::format(", loss scale {}, {} steps skipped", m.loss_scale, m.skipped_steps)
                     : "",
                 m.cuda ? fmt::format(", memory allocated {:.2f} GiB, reserved {:.2f} GiB, peak {:.2f} GiB",
                                      gib(m.memory_allocated), gib(m.memory_reserved), gib(m.memory_peak))
                        : "");
    spdlog::info("{}", format_test_line(m.test));
    summary.epochs = epoch;
    summary.last_train = m.train;
    summary.last_test = m.test;
    summary.has_test = true;
  }
  summary.steps = s.step;
  summary.elapsed_s = seconds_since(run_start);
  return summary;
}

EvalResult test_weights(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                        const std::string& weights_path) {
  const config::ExperimentConfig& c = loaded.config;
  const auto test_set = data::make_dataset(c.data, data::Split::kTest, c.seed);
  const data::DatasetInfo& info = test_set->info();
  if (info.target_kind == data::TargetKind::kNone) {
    throw UserError(fmt::format("data set '{}' has no labels, so there is nothing to test", info.name));
  }
  const bool classification = info.target_kind == data::TargetKind::kClasses;
  const LossKind loss = resolve_loss(c.train.loss, classification);
  torch::nn::Sequential model = models::make_model(c.model, models::model_shape(info, c.model));
  load_weights(model, weights_path);
  parallel::StrategyPlan single;
  single.replicas = {devices.primary()};
  single.reason = "testing saved weights";
  const auto strategy = parallel::make_strategy(single, c, {});
  model->to(strategy->device());
  data::BatchStream stream(test_set, data::loader_options(c.data, data::Split::kTest, c.seed));
  const AmpMode amp = parse_amp_mode(c.train.amp);
  check_amp_device(amp, strategy->device().type(), loaded.sources.at("train.amp"));
  return run_evaluation(model, stream, *strategy, loss, classification, amp);
}

void save_weights(const torch::nn::Sequential& model, const std::string& path) {
  const std::string temporary = path + ".tmp";
  try {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    archive.save_to(temporary);
  } catch (const c10::Error& e) {
    std::remove(temporary.c_str());
    throw Error(ExitCode::kRuntime,
                fmt::format("{}: cannot write the weights: {}", path, first_line(e.what_without_backtrace())));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) throw Error(ExitCode::kRuntime, fmt::format("{}: cannot write the weights: {}", path, error.message()));
}

void load_weights(torch::nn::Sequential& model, const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw CheckpointError(fmt::format("{}: no such weights file", path));
  }
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw CheckpointError(fmt::format("{}: not a LibTorch weights archive ({})", path,
                                      first_line(e.what_without_backtrace())));
  }
  // Module::load would silently reshape parameters to whatever the file
  // holds; check every name and shape first so another model's weights fail.
  torch::NoGradGuard no_grad;
  auto copy_in = [&](const std::string& name, torch::Tensor& target, bool is_buffer) {
    torch::Tensor stored;
    if (!read_nested(archive, name, stored, is_buffer)) {
      throw CheckpointError(fmt::format("{}: has no '{}': these weights are for another model than '{}'", path, name,
                                        fmt::join(models::layer_summary(model), "; ")));
    }
    if (stored.sizes() != target.sizes()) {
      throw CheckpointError(fmt::format("{}: '{}' has shape {} but the model expects {}; check model.* and data.* "
                                        "against the config the weights were trained with",
                                        path, name, logging::shape_str(stored), logging::shape_str(target)));
    }
    target.copy_(stored);
  };
  for (auto& p : model->named_parameters()) copy_in(p.key(), p.value(), false);
  for (auto& b : model->named_buffers()) copy_in(b.key(), b.value(), true);
}

}  // namespace gputrain::train
