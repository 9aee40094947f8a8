#include "gputrain/train/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <tuple>

#include "checkpointing.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/load.h"
#include "gputrain/data/batch_stream.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/memory.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/logging/format.h"
#include "gputrain/models/factory.h"
#include "gputrain/train/amp.h"
#include "gputrain/train/cuda_graph.h"
#include "gputrain/train/fast_paths.h"
#include "gputrain/train/faults.h"
#include "gputrain/train/optim.h"

namespace gputrain::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// Loss and correct-prediction sums that stay on the device between log
// intervals, so the loop never waits on the GPU for a number it won't print.
struct RunningSums : checkpoint::PartialSums {
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
  // The sums over every rank (under ddp), for a checkpoint; these stay as they are.
  checkpoint::PartialSums summed(parallel::Strategy& strategy) const {
    checkpoint::PartialSums out;
    auto total = [&strategy](const torch::Tensor& t) {
      if (!t.defined()) return t;
      torch::Tensor copy = t.clone();
      strategy.all_reduce_sum(copy);
      return copy;
    };
    out.loss = total(loss);
    out.correct = total(correct);
    torch::Tensor n = torch::full({}, samples, torch::TensorOptions().dtype(torch::kInt64).device(strategy.device()));
    strategy.all_reduce_sum(n);
    out.samples = n.item<int64_t>();
    return out;
  }
  // Continues from a checkpoint's sums: the primary rank holds them all, so
  // that the next summed() or collect() over ranks counts them once.
  void restore(const checkpoint::PartialSums& stored, parallel::Strategy& strategy) {
    *this = RunningSums{};
    if (!strategy.is_primary()) return;
    if (stored.loss.defined()) loss = stored.loss.to(strategy.device());
    if (stored.correct.defined()) correct = stored.correct.to(strategy.device());
    samples = stored.samples;
  }
};

torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification) {
  if (!classification) return {};
  return outputs.argmax(1).eq(targets).sum();
}

// The class weights of train.class_weights on `device`, checked against the
// data set's classes; undefined when none are given.
torch::Tensor class_weights(const config::LoadedConfig& loaded, const data::DatasetInfo& info,
                            const torch::Device& device) {
  const std::vector<double>& weights = loaded.config.train.class_weights;
  if (weights.empty()) return {};
  if (info.target_kind != data::TargetKind::kClasses || static_cast<int64_t>(weights.size()) != info.classes) {
    throw ConfigError(loaded.sources.at("train.class_weights"), "train.class_weights",
                      info.target_kind == data::TargetKind::kClasses
                          ? fmt::format("{} weights given but the data set has {}", weights.size(),
                                        count_of(info.classes, "class"))
                          : "weights classes, but this data set has no class labels");
  }
  return torch::tensor(weights, torch::kFloat32).to(device);
}

// One pass over `stream` in eval mode under no-grad; leaves the model in eval
// mode. Classification also counts the confusion matrix, on the device.
EvalResult run_evaluation(torch::nn::Sequential& model, data::BatchSource& stream, parallel::Strategy& strategy,
                          const LossSpec& loss, AmpMode amp) {
  torch::NoGradGuard no_grad;
  model->eval();
  RunningSums sums;
  stream.start_epoch(0);
  const c10::DeviceType device_type = strategy.device().type();
  const bool classification = loss.classes > 0;
  const int64_t cells = loss.classes * loss.classes;
  // Made before the loop: every rank sums it, also one that saw no rows.
  torch::Tensor confusion =
      classification ? torch::zeros({cells}, torch::TensorOptions().dtype(torch::kInt64).device(strategy.device()))
                     : torch::Tensor();
  while (auto batch = stream.next()) {
    const data::Batch local = strategy.local_part(*batch);
    const torch::Tensor targets = local.targets.to(strategy.device(), /*non_blocking=*/true);
    AutocastScope autocast(amp, device_type);
    const torch::Tensor outputs = strategy.forward(model, local.inputs);
    sums.add(loss_sum(loss.kind, outputs, targets, loss.class_weights),
             correct_count(outputs, targets, classification), local.size());
    if (classification && local.size() > 0) {
      confusion += torch::bincount(targets * loss.classes + outputs.argmax(1), {}, cells);
    }
  }
  EvalResult result = sums.collect(classification, strategy);
  if (classification) {
    strategy.all_reduce_sum(confusion);
    const torch::Tensor host = confusion.cpu();
    result.confusion.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + cells);
  }
  return result;
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
  parallel::StrategyPlan plan;
  int64_t world_size = 1;
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
  int64_t classes = 0;          // classification only
  torch::Tensor class_weights;  // train.class_weights on `device`; undefined when none
  int64_t accumulation = 1;
  AmpMode amp = AmpMode::kOff;
  std::unique_ptr<GradScaler> scaler;
  std::unique_ptr<GraphedStep> graphed;  // train.cuda_graph, where the run allows it
  MeanBackward backward_mean;
  int64_t steps_per_epoch = 0;
  int64_t step = 0;
  // Where the run stands besides `step`: what a checkpoint records.
  int64_t epochs_done = 0;
  int64_t batch = 0;  // micro-batches of the current epoch consumed
  RunningSums epoch_sums;
  RunningSums interval;
  int64_t nan_skipped = 0;  // train.on_nan: skip
  std::optional<double> best_score;
  std::optional<checkpoint::Position> resumed_from;
  std::string resumed_path;
  std::unique_ptr<detail::Checkpointer> checkpointer;  // while fit() runs
  parallel::StepFlags agreed;                           // the last optimizer step's, agreed by every rank
  bool stopping = false;

  void run_optimizer_step(const std::vector<data::Batch>& group);
  EvalResult train_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start, double& epoch_s);
  void forward_only_epoch(int64_t epoch, TrainObserver& observer, Clock::time_point run_start);
  EvalResult evaluate();
  LossSpec loss_spec() const { return {loss, classification ? classes : 0, class_weights}; }
  int64_t skipped_steps() const { return scaler->skipped_steps() + nan_skipped; }
  checkpoint::TrainingState snapshot();
  void save_checkpoint(bool regular, bool best);
  void after_step();
  void end_epoch(int64_t epoch, const EvalResult& test);
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
  device::set_current_device(s.device);
  spdlog::info("strategy: {} ({})", s.strategy->describe(), plan.reason);
  s.plan = plan;
  s.world_size = launch.world_size;

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
  s.classes = info.classes;
  if (info.target_kind != data::TargetKind::kNone) {
    try {
      s.loss = resolve_loss(c.train.loss, s.classification);
    } catch (const ConfigError& e) {
      throw ConfigError(loaded.sources.at("train.loss"), e.key(), e.what());
    }
  }

  const auto build_model = [&] {
    s.model = models::make_model(c.model, models::model_shape(info, c.model));
    s.model->to(s.device);
    s.class_weights = class_weights(loaded, info, s.device);
    if (c.train.channels_last) to_channels_last(s.model);
    configure_backends(c.train, s.device);
    s.strategy->prepare(s.model);
    s.optimizer = make_optimizer(c.optim, s.model->parameters());
  };
  device::with_resource_errors(fmt::format("building the model ({}) and its optimizer", c.model.name),
                               "Make the model smaller (fewer or narrower layers under model:)", build_model);
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
               : info.target_kind == data::TargetKind::kValues ? "a regression on " + count_of(info.targets, "target")
                                                               : "no labels");
  spdlog::info("batch: {} per optimizer step{}; {} per epoch", count_of(c.data.batch_size, "sample"),
               s.accumulation > 1 ? fmt::format(" (micro-batch {} x {} accumulation steps)", micro.batch_size,
                                                s.accumulation)
                                  : "",
               count_of(s.steps_per_epoch, "step"));
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

TrainLayout Trainer::layout() const {
  const State& s = *state_;
  TrainLayout l;
  l.strategy = s.plan;
  l.world_size = s.world_size;
  l.train_samples = s.train_set->info().samples;
  l.micro_batch = s.config.data.batch_size / s.accumulation;
  const int64_t rest = l.train_samples % l.micro_batch;
  l.last_micro_batch = rest == 0 || s.config.data.drop_last ? l.micro_batch : rest;
  l.steps_per_epoch = s.steps_per_epoch;
  l.labeled = s.test_stream != nullptr;
  l.classification = s.classification;
  return l;
}

void Trainer::State::run_optimizer_step(const std::vector<data::Batch>& group) {
  int64_t group_samples = 0;
  for (const auto& mb : group) group_samples += mb.size();
  schedule->apply(*optimizer, step);
  if (graphed) {
    const StepSums sums = graphed->step(group.front());  // one micro-batch: cuda_graph_blocker saw to it
    epoch_sums.add(sums.loss_sum, sums.correct, group_samples);
    interval.add(sums.loss_sum, sums.correct, group_samples);
    agreed = strategy->agree(checkpointer->requests(), {});
    ++step;
    return;
  }
  optimizer->zero_grad();
  std::vector<std::tuple<torch::Tensor, torch::Tensor, int64_t>> measured;  // loss, correct, samples
  for (const auto& global : group) {
    const data::Batch mb = strategy->local_part(global);
    torch::Tensor outputs;
    torch::Tensor batch_loss;
    torch::Tensor targets = mb.targets.to(device, /*non_blocking=*/true);
    {
      device::NvtxRange range("forward");
      AutocastScope autocast(amp, device.type());  // the forward pass and the loss
      outputs = strategy->forward(model, model_inputs(mb.inputs, device, config.train.channels_last));
      batch_loss = loss_sum(loss, outputs, targets, class_weights);
    }
    // Averaging over the whole (global) group's size makes K micro-batches, or N
    // ranks, one step of their combined batch, and weights a short last group
    // by its real size.
    {
      device::NvtxRange range("backward");
      backward_mean(scaler->scale(batch_loss), group_samples);
    }
    // argmax records no autograd node, so the outputs need no detach() (one op fewer per step)
    measured.emplace_back(batch_loss.detach(), correct_count(outputs, targets, classification), mb.size());
  }
  device::NvtxRange range("optimizer");
  strategy->after_backward(model);
  // fp16's scaler skips non-finite steps itself; otherwise this is the one
  // device sync per optimizer step that train.on_nan costs. The step's loss
  // total is finite exactly when every micro-batch's is (a float32 sum
  // overflowing to inf is a diverging run too), and reading one number is
  // the fewest ops: small models feel each one. Under ddp the same sync also
  // carries the ranks' stop and checkpoint requests: one collective a step.
  torch::Tensor step_loss;
  if (!scaler->enabled()) {
    step_loss = std::get<0>(measured.front());
    for (std::size_t i = 1; i < measured.size(); ++i) step_loss = step_loss + std::get<0>(measured[i]);
  }
  agreed = strategy->agree(checkpointer->requests(), step_loss);
  if (agreed.non_finite) {
    if (config.train.on_nan == "stop") {
      throw Error(ExitCode::kRuntime, non_finite_loss_message(epochs_done + 1, step + 1, checkpointer->last_good()));
    }
    ++nan_skipped;
    spdlog::warn("epoch {}, step {}: the loss is not finite; batch skipped without an optimizer step (train.on_nan: "
                 "skip, {} so far)",
                 epochs_done + 1, step + 1, nan_skipped);
    ++step;
    return;
  }
  for (const auto& [batch_loss, correct, samples] : measured) {
    epoch_sums.add(batch_loss, correct, samples);
    interval.add(batch_loss, correct, samples);
  }
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
  train_stream->start_epoch(epoch - 1, batch);  // batch > 0 when resuming mid-epoch
  const auto epoch_start = Clock::now();
  auto interval_start = epoch_start;
  std::vector<data::Batch> group;
  Progress progress{epoch, config.train.epochs, batch, train_stream->batches_per_epoch(), 0, 0, 0};
  auto log_interval = [&] {
    const EvalResult r = interval.collect(classification, *strategy);
    const double interval_s = seconds_since(interval_start);
    StepMetrics m{epoch,
                  step,
                  r.mean_loss(),
                  classification ? std::optional<double>(r.accuracy()) : std::nullopt,
                  interval_s > 0 ? r.samples / interval_s : 0.0,
                  schedule->lr_at(step - 1),
                  seconds_since(run_start),
                  scaler->scale(),
                  skipped_steps()};
    progress.last_loss = m.loss;
    observer.on_step(m);
    interval = RunningSums{};
    interval_start = Clock::now();
  };
  auto flush_group = [&] {
    run_optimizer_step(group);
    group.clear();
    if (step % config.train.log_every == 0) log_interval();
    after_step();  // after the log line, so that a checkpoint holds the interval as it continues
  };
  while (!stopping) {
    std::optional<data::Batch> next = next_batch(*train_stream);
    if (!next) break;
    progress.samples += next->size();
    group.push_back(std::move(*next));
    ++batch;
    if (static_cast<int64_t>(group.size()) == accumulation) flush_group();
    ++progress.batch;
    progress.epoch_elapsed_s = seconds_since(epoch_start);
    observer.on_progress(progress);
  }
  if (!group.empty()) flush_group();  // the epoch's last, shorter group still steps
  if (stopping) return {};
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
    const torch::Tensor outputs = strategy->forward(model, local.inputs);
    samples += local.size();
    spdlog::debug("forward: input {} output {}", logging::shape_str(local.inputs), logging::shape_str(outputs));
    if (checkpointer->stop_requested()) {  // nothing trains here, so there is nothing to checkpoint
      stopping = true;
      return;
    }
  }
  EpochMetrics m;
  m.epoch = epoch;
  m.train.samples = samples;
  m.train.classification = false;
  m.epoch_s = seconds_since(epoch_start);
  m.loader_wait_s = train_stream->wait_seconds();
  m.samples_per_s = m.epoch_s > 0 ? samples / m.epoch_s : 0.0;
  m.elapsed_s = seconds_since(run_start);
  observer.on_epoch(m);
}

EvalResult Trainer::State::evaluate() {
  const EvalResult result = run_evaluation(model, *test_stream, *strategy, loss_spec(), amp);
  model->train();
  return result;
}

EvalResult Trainer::evaluate() {
  if (!state_->test_stream) throw UserError("the data set has no labels, so there is nothing to evaluate");
  return state_->evaluate();
}

namespace {

// The host running out of memory or threads while training.
[[noreturn]] void rethrow_host_exhaustion(const config::ExperimentConfig& c) {
  device::rethrow_as_resource_error(
      fmt::format("training at data.batch_size {} with {} loader workers", c.data.batch_size, c.data.num_workers),
      "Lower data.batch_size (train.accumulation_steps splits a batch into smaller micro-batches), "
      "data.num_workers, or the model's size");
}

// The same while testing, whose batches data.test_batch_size sizes when set.
[[noreturn]] void rethrow_host_exhaustion_testing(const config::DataConfig& d) {
  const bool own = d.test_batch_size > 0;
  const char* key = own ? "data.test_batch_size" : "data.batch_size";
  device::rethrow_as_resource_error(
      fmt::format("testing at {} {} with {} loader workers", key, own ? d.test_batch_size : d.batch_size,
                  d.num_workers),
      fmt::format("Lower {}, data.num_workers, or the model's size", key));
}

}  // namespace

// A function-try-block: running out of GPU memory anywhere in training or
// testing becomes one Error that says what to change, and so does the host
// running out of memory or threads.
TrainSummary Trainer::fit(TrainObserver& observer, const FitOptions& options) try {
  State& s = *state_;
  s.checkpointer = std::make_unique<detail::Checkpointer>(s.config, options, *s.strategy, s.resumed_from,
                                                          s.resumed_path);
  s.stopping = false;
  const auto run_start = Clock::now();
  TrainSummary summary;
  summary.epochs = s.epochs_done;
  const bool labeled = s.test_stream != nullptr;
  for (int64_t epoch = s.epochs_done + 1; epoch <= s.config.train.epochs && !s.stopping; ++epoch) {
    if (!labeled) {
      s.forward_only_epoch(epoch, observer, run_start);
      if (!s.stopping) summary.epochs = s.epochs_done = epoch;
      continue;
    }
    device::reset_peak_memory(s.device);
    EpochMetrics m;
    m.epoch = epoch;
    m.train = s.train_epoch(epoch, observer, run_start, m.epoch_s);
    if (s.stopping) break;
    m.loader_wait_s = s.train_stream->wait_seconds();
    m.step = s.step;
    m.samples_per_s = m.epoch_s > 0 ? m.train.samples / m.epoch_s : 0.0;
    m.lr = s.schedule->lr_at(std::max<int64_t>(s.step - 1, 0));
    m.loss_scale = s.scaler->scale();
    m.skipped_steps = s.skipped_steps();
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
    spdlog::info("Epoch {}/{}: train loss {:.4f}{}, {:.0f} samples/s, {:.1f} s (loader wait {:.2f} s){}{}", epoch,
                 s.config.train.epochs, m.train.mean_loss(),
                 s.classification ? fmt::format(", accuracy {:.2f}%", 100.0 * m.train.accuracy()) : "",
                 m.samples_per_s, m.epoch_s, m.loader_wait_s,
                 s.scaler->enabled() ? fmt::format(", loss scale {}, {} steps skipped", m.loss_scale, m.skipped_steps)
                 : s.nan_skipped > 0 ? fmt::format(", {} steps skipped for a non-finite loss", s.nan_skipped)
                                     : "",
                 m.cuda ? fmt::format(", memory allocated {:.2f} GiB, reserved {:.2f} GiB, peak {:.2f} GiB",
                                      gib(m.memory_allocated), gib(m.memory_reserved), gib(m.memory_peak))
                        : "");
    spdlog::info("{}", format_test_line(m.test));
    s.end_epoch(epoch, m.test);
    summary.epochs = epoch;
    summary.last_train = m.train;
    summary.last_test = m.test;
    summary.has_test = true;
  }
  summary.steps = s.step;
  summary.elapsed_s = seconds_since(run_start);
  summary.stopped = s.stopping;
  summary.checkpoint = s.checkpointer->last_good();
  return summary;
} catch (const c10::Error& e) {
  const std::string detail = first_line(e.what_without_backtrace());
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) == nullptr && !is_out_of_memory(detail)) {
    rethrow_host_exhaustion(state_->config);
  }
  const State& s = *state_;
  OutOfMemoryContext context;
  context.device = failing_device(detail, s.device.str());
  context.batch_size = s.config.data.batch_size;
  context.accumulation_steps = s.accumulation;
  context.amp = s.amp != AmpMode::kOff;
  context.memory = device::memory_stats(torch::Device(context.device));
  context.detail = detail;
  throw Error(ExitCode::kRuntime, out_of_memory_message(context));
} catch (const std::exception&) {
  rethrow_host_exhaustion(state_->config);
}

void Trainer::resume(const checkpoint::Checkpoint& checkpoint) {
  State& s = *state_;
  const checkpoint::TrainingState& stored = checkpoint.state();
  const checkpoint::Position& at = stored.position;
  // The reader refuses negative counts; what is left to check needs the config.
  const int64_t epochs = s.config.train.epochs;
  if (at.epoch > epochs || (at.epoch == epochs && at.batch > 0)) {
    throw CheckpointError(fmt::format("{}: its position (epoch {}, micro-batch {}, step {}) lies beyond train.epochs "
                                      "({}); raise train.epochs with --set train.epochs=N to train on from it",
                                      checkpoint.name(), at.epoch, at.batch, at.step, epochs));
  }
  if (at.step < at.epoch) {  // every epoch takes one optimizer step at least
    throw CheckpointError(fmt::format("{}: its position (epoch {}, step {}) is impossible: fewer steps than epochs "
                                      "done. The file was not written by gputrain's training",
                                      checkpoint.name(), at.epoch, at.step));
  }
  if (at.batch > s.train_stream->batches_per_epoch()) {
    throw CheckpointError(fmt::format("{}: stopped {} micro-batches into an epoch, but an epoch has {} here",
                                      checkpoint.name(), at.batch, s.train_stream->batches_per_epoch()));
  }
  checkpoint.load_model(*s.model);
  checkpoint.load_optimizer(*s.optimizer, s.device);
  s.scaler->load_state_dict(stored.scaler);
  s.step = at.step;
  s.epochs_done = at.epoch;
  s.batch = at.batch;
  s.epoch_sums.restore(stored.epoch_sums, *s.strategy);
  s.interval.restore(stored.interval_sums, *s.strategy);
  s.nan_skipped = stored.skipped_steps;
  s.best_score = stored.best_score;
  checkpoint::restore_rng(stored.rng);
  s.resumed_from = at;
  s.resumed_path = checkpoint.name();
}

checkpoint::TrainingState Trainer::State::snapshot() {
  checkpoint::TrainingState state;
  state.position = {epochs_done, batch, step};
  state.epoch_sums = epoch_sums.summed(*strategy);
  state.interval_sums = interval.summed(*strategy);
  state.scaler = scaler->state_dict();
  state.rng = checkpoint::capture_rng();
  state.best_score = best_score;
  state.skipped_steps = nan_skipped;
  state.config = config::dump_config(config);
  return state;
}

void Trainer::State::save_checkpoint(bool regular, bool best) {
  checkpointer->write(snapshot(), *model, *optimizer, regular, best);
}

void Trainer::State::after_step() {
  const detail::Checkpointer::Due due = checkpointer->due_after_step(step, agreed);
  if (due.checkpoint) save_checkpoint(/*regular=*/true, /*best=*/false);
  stopping = due.stop;
}

void Trainer::State::end_epoch(int64_t epoch, const EvalResult& test) {
  epochs_done = epoch;
  batch = 0;
  epoch_sums = RunningSums{};
  interval = RunningSums{};
  const double score = classification ? test.accuracy() : -test.mean_loss();
  const bool improved = !best_score || score > *best_score;
  if (improved) best_score = score;
  const bool regular = checkpointer->due_at_epoch_end(epoch);
  const bool best = improved && checkpointer->keeps_best();
  if (regular || best) save_checkpoint(regular, best);
}

// A function-try-block, as fit() is: the host running out of memory or
// threads says which keys to lower.
EvalResult test_weights(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                        const std::string& weights_path) try {
  const config::ExperimentConfig& c = loaded.config;
  const auto test_set = data::make_dataset(c.data, data::Split::kTest, c.seed);
  const data::DatasetInfo& info = test_set->info();
  if (info.target_kind == data::TargetKind::kNone) {
    throw UserError(fmt::format("data set '{}' has no labels, so there is nothing to test", info.name));
  }
  const bool classification = info.target_kind == data::TargetKind::kClasses;
  LossSpec loss{resolve_loss(c.train.loss, classification), classification ? info.classes : 0, {}};
  torch::nn::Sequential model = models::make_model(c.model, models::model_shape(info, c.model));
  load_weights(model, weights_path);
  parallel::StrategyPlan single;
  single.replicas = {devices.primary()};
  single.reason = "testing saved weights";
  const auto strategy = parallel::make_strategy(single, c, {});
  model->to(strategy->device());
  loss.class_weights = class_weights(loaded, info, strategy->device());
  data::BatchStream stream(test_set, data::loader_options(c.data, data::Split::kTest, c.seed));
  const AmpMode amp = parse_amp_mode(c.train.amp);
  check_amp_device(amp, strategy->device().type(), loaded.sources.at("train.amp"));
  return run_evaluation(model, stream, *strategy, loss, amp);
} catch (const std::exception&) {
  rethrow_host_exhaustion_testing(loaded.config.data);
}

}  // namespace gputrain::train
