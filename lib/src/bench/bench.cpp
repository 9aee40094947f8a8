#include "gputrain/bench/bench.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/cuda.h>

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
#include "gputrain/step/backends.h"
#include "gputrain/step/optimizer_step.h"
#include "gputrain/train/builder.h"

namespace gputrain::bench {

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

namespace {

// What the timed step does beyond forward, backward and the update, as the run has it.
std::string describe_step(const step::StepParts& parts) {
  std::vector<std::string> included;
  if (parts.amp != config::AmpMode::kOff) included.push_back(fmt::format("autocast {}", config::word(parts.amp)));
  if (parts.scaler->enabled()) included.push_back("the gradient scaler");
  if (parts.grad_clip > 0) included.push_back(fmt::format("gradients clipped to norm {}", parts.grad_clip));
  included.push_back(parts.scaler->enabled() ? "the scaler's non-finite check"
                     : parts.non_finite      ? "the non-finite check on the device"
                                             : "the non-finite check of the step's loss");
  return fmt::format("{}", fmt::join(included, ", "));
}

}  // namespace

BenchReport run_bench(const plan::RunPlan& plan, const BenchOptions& options, const BenchProfile& profiling) {
  GPUTRAIN_CHECK(options.steps >= 1 && options.warmup >= 0, "bench needs steps >= 1 and warmup >= 0");
  // The training run's own parts (strategy, loader, model, optimizer, scaler,
  // non-finite check, step), built as train builds them: the step timed is the step that trains.
  train::RunParts run = train::build_run(plan);
  const torch::Device device = run.device;
  models::train_mode(*run.model, plan.network.freeze_batchnorm);  // as each training epoch starts
  const step::AgreeFn agree = [&](const torch::Tensor& step_loss) { return run.strategy->agree({}, step_loss); };
  int64_t step_number = 0;
  auto noted = [&](const step::StepResult& result) {  // the trainer's bookkeeping of a checked step
    int64_t rows = 0;
    for (const step::MicroBatchSums& sums : result.sums) rows += sums.samples;
    if (run.non_finite) run.non_finite->stepped(++step_number, rows);
    return rows;
  };

  // The phases, timed where the step marks their ends (a device sync at each on CUDA), summed over a
  // step's micro-batches: data (the step's micro-batches from the loader), forward (with the loss),
  // backward, optimizer (the agreement, unscale, clip, update).
  std::vector<PhaseTimer> timers{{"data"}, {"forward"}, {"backward"}, {"optimizer"}};
  std::array<double, 4> step_ms{};
  Clock::time_point mark;
  step::StepParts parts = train::step_parts(run);
  parts.phase_done = [&](step::StepPhase ended) {
    sync(device);
    const Clock::time_point now = Clock::now();
    step_ms[1 + static_cast<std::size_t>(ended)] += ms_between(mark, now);
    mark = now;
  };
  const std::unique_ptr<step::OptimizerStep> phased = step::make_eager_step(parts);

  PhaseTimer whole{"step"};
  int64_t samples = 0;
  double timed_ms = 0;
  EndlessBatches batches(*run.train_batches);
  train::StepProfiler profiler(device.is_cuda());
  std::optional<train::ProfileSummary> profile;
  for (int64_t i = 0; i < options.warmup + options.steps + profiling.steps; ++i) {
    const bool profiled = i >= options.warmup + options.steps;
    if (profiled && !profiler.running()) profiler.start();
    const std::unique_ptr<train::StepMark> step_mark = profiled ? std::make_unique<train::StepMark>(i + 1) : nullptr;
    step_ms = {};
    const Clock::time_point start = Clock::now();
    std::vector<data::Batch> group;
    {
      device::NvtxRange range("data");
      for (int64_t k = 0; k < run.batch.accumulation; ++k) group.push_back(batches.next());
      sync(device);
    }
    mark = Clock::now();
    step_ms[0] = ms_between(start, mark);
    const int64_t rows = noted(phased->run(group, agree));
    if (i < options.warmup || profiled) continue;
    for (std::size_t p = 0; p < timers.size(); ++p) timers[p].add(step_ms[p]);
    whole.add(ms_between(start, mark));
    timed_ms += ms_between(start, mark);
    samples += rows;
  }
  if (profiler.running()) profile = profiler.stop(profiling.trace, profiling.steps);
  run.train_batches->stop();

  // The compute bound: the run's own step (its CUDA graph where training
  // replays one) on the epoch's first group of micro-batches, already on the
  // device, with no sync between steps.
  run.train_batches->start_epoch(0);
  std::vector<data::Batch> fixed;
  int64_t fixed_rows = 0;
  for (int64_t k = 0; k < run.batch.accumulation; ++k) {
    data::Batch batch = batches.next();
    batch.inputs = batch.inputs.to(device);
    if (batch.targets.defined()) batch.targets = batch.targets.to(device);
    fixed_rows += batch.size();
    fixed.push_back(std::move(batch));
  }
  run.train_batches->stop();  // no loader thread may compete with the bound's steps
  auto bound_step = [&] { noted(run.stepper->run(fixed, agree)); };
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
  report.model = config::word(plan.network.name);
  report.dataset = run.train_set->info().name;
  report.device = device.str();
  report.threads = at::get_num_threads();
  report.batch = fixed.front().size();
  report.accumulation = run.batch.accumulation;
  report.step = describe_step(parts);
  report.steps = options.steps;
  report.warmup = options.warmup;
  for (const PhaseTimer& t : timers) report.phases.push_back(t.result());
  report.phases.push_back(whole.result());
  report.samples_per_s = timed_ms > 0 ? 1e3 * static_cast<double>(samples) / timed_ms : 0.0;
  report.bound_step_ms = bound_ms;
  report.bound_samples_per_s = bound_ms > 0 ? 1e3 * static_cast<double>(fixed_rows) / bound_ms : 0.0;
  report.bound_graphed = run.step.fast.cuda_graph;
  report.profile = std::move(profile);
  return report;
}

std::string format_bench(const BenchReport& r) {
  std::string text = fmt::format(
      "bench: {} on {}, {}{}, batch {}{}, {} steps after {} warm-up\nthe training step, with {}\n", r.model, r.dataset,
      r.device, r.device == "cpu" ? fmt::format(" ({} threads)", r.threads) : "", r.batch,
      r.accumulation > 1 ? fmt::format(" x {} micro-batches a step", r.accumulation) : "", r.steps, r.warmup, r.step);
  text += fmt::format("{:<15}{:>10}{:>10}\n", "phase", "mean ms", "min ms");
  for (const PhaseTime& p : r.phases) {
    text += fmt::format("{:<15}{:>10.3f}{:>10.3f}", p.name, p.mean_ms, p.min_ms);
    text += p.name == "step" ? fmt::format("  {:.0f} samples/s\n", r.samples_per_s) : "\n";
  }
  text += fmt::format(
      "{:<15}{:>10.3f}{:>10}  {:.0f} samples/s (the train step on one step's batches already on {}{}; the loop "
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

}  // namespace gputrain::bench
