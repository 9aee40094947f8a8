#include "gputrain/train/bench.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <optional>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/models/freeze.h"
#include "gputrain/models/whiten.h"
#include "gputrain/optim/loss.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/backends.h"
#include "gputrain/step/channels_last.h"
#include "gputrain/step/cuda_graph.h"
#include "gputrain/train/builder.h"

namespace gputrain::train {

namespace {

using Clock = std::chrono::steady_clock;

// Running mean and minimum of one phase, in milliseconds.
struct PhaseTimer {
  std::string name;
  double total_ms = 0;
  double min_ms = std::numeric_limits<double>::infinity();
  int64_t count = 0;

  void add(double ms) {
    total_ms += ms;
    min_ms = std::min(min_ms, ms);
    ++count;
  }
  PhaseTime result() const { return {name, count > 0 ? total_ms / count : 0.0, count > 0 ? min_ms : 0.0}; }
};

// Waits for the device, so a phase's time includes its kernels.
void sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// The loader's batches without end: the next epoch starts where one ends.
class EndlessBatches {
 public:
  explicit EndlessBatches(data::BatchLoader& source) : source_(source) { source_.start_epoch(epoch_); }
  data::Batch next() {
    std::optional<data::Batch> batch = source_.next();
    if (!batch) {
      source_.start_epoch(++epoch_);
      batch = source_.next();
    }
    return std::move(*batch);
  }

 private:
  data::BatchLoader& source_;
  int64_t epoch_ = 0;
};

}  // namespace

LoaderBenchReport run_loader_bench(const plan::RunPlan& plan, const BenchOptions& options) {
  GPUTRAIN_CHECK(options.steps >= 1 && options.warmup >= 0, "bench needs steps >= 1 and warmup >= 0");
  const torch::Device device = plan.devices.primary();
  const plan::FastPaths& fast = plan.step.fast;  // the intra-op threads the run would give a resident split's batches
  step::configure_backends(fast.matmul_precision.value, fast.threads, fast.cudnn_benchmark);
  const auto source =
      data::make_batch_loader(plan.train_set, plan.train_loader, plan.device_cache.train, plan.decode.train, device);
  EndlessBatches batches(*source);
  int64_t samples = 0;
  Clock::time_point start;
  for (int64_t i = 0; i < options.warmup + options.steps; ++i) {
    if (i == options.warmup) start = Clock::now();
    const data::Batch batch = batches.next();
    const torch::Tensor on_device = batch.inputs.to(device, /*non_blocking=*/true);
    sync(device);
    if (i >= options.warmup) samples += on_device.size(0);
  }
  const double timed_ms = ms_between(start, Clock::now());
  source->stop();
  LoaderBenchReport report;
  report.dataset = plan.train_set->info().name;
  report.device = device.str();
  report.threads = at::get_num_threads();
  report.workers = plan.train_loader.num_workers;
  report.device_cache = plan.device_cache.train.on;
  report.batch = plan.train_loader.batch_size;
  report.batches = options.steps;
  report.warmup = options.warmup;
  report.samples_per_s = timed_ms > 0 ? 1e3 * static_cast<double>(samples) / timed_ms : 0.0;
  report.wait_ms = timed_ms / static_cast<double>(options.steps);
  return report;
}

std::string format_loader_bench(const LoaderBenchReport& r) {
  return fmt::format(
      "bench --loader-only: {} on {}{}, {}, batch {}, {} batches after {} warm-up\n"
      "{:.0f} samples/s, {:.3f} ms a batch\n",
      r.dataset, r.device, r.device == "cpu" ? fmt::format(" ({})", count_of(r.threads, "thread")) : "",
      r.device_cache ? "assembled on the device" : count_of(r.workers, "worker"), r.batch, r.batches, r.warmup,
      r.samples_per_s, r.wait_ms);
}

BenchReport run_bench(const plan::RunPlan& plan, const BenchOptions& options, const BenchProfile& profiling) {
  GPUTRAIN_CHECK(options.steps >= 1 && options.warmup >= 0, "bench needs steps >= 1 and warmup >= 0");
  const config::ExperimentConfig& c = plan.loaded.config;
  const torch::Device device = plan.devices.primary();
  const config::AmpMode amp = plan.step.amp;
  const plan::FastPaths& fast = plan.step.fast;  // as train decides, so the step timed is the step trained

  torch::manual_seed(c.seed);
  const std::shared_ptr<const data::Dataset>& dataset = plan.train_set;
  const data::DatasetInfo& info = dataset->info();
  if (info.target_kind == data::TargetKind::kNone) {
    throw UserError(fmt::format("data set '{}' has no labels, so there is no train step to time", info.name));
  }
  const optim::LossSpec& loss = plan.loss;
  // A forward pass takes one micro-batch, as in training.
  const auto source =
      data::make_batch_loader(dataset, plan.train_loader, plan.device_cache.train, plan.decode.train, device);
  torch::nn::Sequential model = build_planned_model(plan, device);  // frozen parameters take no step
  apply_fast_paths(fast, model);
  models::train_mode(*model, c.model.freeze_batchnorm);
  const auto optimizer = optim::make_optimizer(
      plan.optim,
      optim::param_groups(plan.optim, model->named_parameters(), models::first_epochs_only(model, c.model)));

  EndlessBatches batches(*source);
  auto next = [&] { return batches.next(); };
  auto on_device = [&](const torch::Tensor& t) {
    return step::model_inputs(t.to(device, /*non_blocking=*/true), device, fast.channels_last);
  };
  auto forward = [&](const torch::Tensor& inputs, const torch::Tensor& targets) {
    step::AutocastScope autocast(amp, device.type());
    return optim::loss_sum(loss, model->forward(inputs), targets);
  };
  optim::MeanBackward backward_mean;  // as the trainer backpropagates

  std::vector<PhaseTimer> timers{{"data"}, {"forward"}, {"backward"}, {"optimizer"}};
  PhaseTimer whole{"step"};
  int64_t samples = 0;
  double timed_ms = 0;
  StepProfiler profiler(device.is_cuda());
  std::optional<ProfileSummary> profile;
  for (int64_t i = 0; i < options.warmup + options.steps + profiling.steps; ++i) {
    const bool profiled = i >= options.warmup + options.steps;
    if (profiled && !profiler.running()) profiler.start();
    const std::unique_ptr<StepMark> mark = profiled ? std::make_unique<StepMark>(i + 1) : nullptr;
    std::array<Clock::time_point, 5> at;
    at[0] = Clock::now();
    torch::Tensor inputs, targets;
    {
      device::NvtxRange range("data");
      const data::Batch batch = next();
      inputs = on_device(batch.inputs);
      targets = on_device(batch.targets);
      sync(device);
    }
    at[1] = Clock::now();
    torch::Tensor batch_loss;
    {
      device::NvtxRange range("forward");
      batch_loss = forward(inputs, targets);
      sync(device);
    }
    at[2] = Clock::now();
    {
      device::NvtxRange range("backward");
      backward_mean(batch_loss, inputs.size(0));
      sync(device);
    }
    at[3] = Clock::now();
    {
      device::NvtxRange range("optimizer");
      optimizer->step();
      optimizer->zero_grad();
      sync(device);
    }
    at[4] = Clock::now();
    if (i < options.warmup || profiled) continue;
    for (std::size_t p = 0; p < timers.size(); ++p) timers[p].add(ms_between(at[p], at[p + 1]));
    whole.add(ms_between(at[0], at[4]));
    timed_ms += ms_between(at[0], at[4]);
    samples += inputs.size(0);
  }
  if (profiler.running()) profile = profiler.stop(profiling.trace, profiling.steps);
  source->stop();

  // The compute bound: the same step on one full batch already on the device.
  source->start_epoch(0);
  const data::Batch fixed = next();
  const torch::Tensor inputs = on_device(fixed.inputs), targets = on_device(fixed.targets);
  source->stop();  // no loader thread may compete with the bound's steps
  // Where training replays a CUDA graph, so does the bound: the eager phases
  // above cannot be timed inside one, but the step as training runs it can.
  std::unique_ptr<step::GraphedStep> graphed;
  if (fast.cuda_graph) {
    graphed =
        std::make_unique<step::GraphedStep>(model, *optimizer, loss, fast.channels_last, device,
                                            step::GraphPlan{inputs.size(0), /*grad_clip=*/0, /*micro_batches=*/1, amp});
  }
  const data::Batch on_device_batch{inputs, targets, fixed.index};
  auto bound_step = [&] {
    if (graphed) {
      graphed->step({on_device_batch});
      return;
    }
    optimizer->zero_grad();
    backward_mean(forward(inputs, targets), inputs.size(0));
    optimizer->step();
  };
  for (int64_t i = 0; i < options.warmup; ++i) bound_step();
  sync(device);
  const auto bound_start = Clock::now();
  {
    device::NvtxRange range("compute bound");
    for (int64_t i = 0; i < options.steps; ++i) bound_step();
    sync(device);
  }
  const double bound_ms = ms_between(bound_start, Clock::now()) / static_cast<double>(options.steps);

  BenchReport report;
  report.model = config::word(c.model.name);
  report.dataset = info.name;
  report.device = device.str();
  report.threads = at::get_num_threads();
  report.batch = inputs.size(0);
  report.steps = options.steps;
  report.warmup = options.warmup;
  for (const PhaseTimer& t : timers) report.phases.push_back(t.result());
  report.phases.push_back(whole.result());
  report.samples_per_s = timed_ms > 0 ? 1e3 * static_cast<double>(samples) / timed_ms : 0.0;
  report.bound_step_ms = bound_ms;
  report.bound_samples_per_s = bound_ms > 0 ? 1e3 * static_cast<double>(report.batch) / bound_ms : 0.0;
  report.bound_graphed = graphed != nullptr;
  report.profile = std::move(profile);
  return report;
}

std::string format_bench(const BenchReport& r) {
  std::string text =
      fmt::format("bench: {} on {}, {}{}, batch {}, {} steps after {} warm-up\n", r.model, r.dataset, r.device,
                  r.device == "cpu" ? fmt::format(" ({} threads)", r.threads) : "", r.batch, r.steps, r.warmup);
  text += fmt::format("{:<15}{:>10}{:>10}\n", "phase", "mean ms", "min ms");
  for (const PhaseTime& p : r.phases) {
    text += fmt::format("{:<15}{:>10.3f}{:>10.3f}", p.name, p.mean_ms, p.min_ms);
    text += p.name == "step" ? fmt::format("  {:.0f} samples/s\n", r.samples_per_s) : "\n";
  }
  text += fmt::format(
      "{:<15}{:>10.3f}{:>10}  {:.0f} samples/s (train step on one batch already on {}{}; the loop "
      "above runs at {:.0f}% of it)\n",
      "compute bound", r.bound_step_ms, "", r.bound_samples_per_s, r.device,
      r.bound_graphed ? ", replayed as a CUDA graph" : "",
      r.bound_samples_per_s > 0 ? 100.0 * r.samples_per_s / r.bound_samples_per_s : 0.0);
  if (r.profile) {
    text +=
        fmt::format("profile: {} steps after the timed ones in {} (ui.perfetto.dev); the operators by self time:\n{}",
                    r.profile->steps, r.profile->trace.string(), top_operators_table(*r.profile));
  }
  return text;
}

}  // namespace gputrain::train
