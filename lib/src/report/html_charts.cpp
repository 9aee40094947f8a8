#include "html_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gputrain/report/gpu_monitor.h"

namespace gputrain::report::detail {

namespace {

constexpr const char* kTrainLight = "#9ecae1";
constexpr const char* kTrain = "#1f77b4";
constexpr const char* kTest = "#d62728";
const std::vector<const char*> kPalette{"#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                        "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

// An interval's x: its optimizer step.
double step_of(const MetricsRecord& r) { return as_figure(r.step).value_or(0); }

template <class Field>
Series from_steps(const std::vector<MetricsRecord>& steps, Field MetricsRecord::*field, std::string name,
                  const char* color, double scale = 1.0) {
  Series s{std::move(name), color, {}, false, false, 1.2};
  for (const auto& r : steps) {
    if (r.*field) s.points.emplace_back(step_of(r), static_cast<double>(*(r.*field)) * scale);
  }
  return s;
}

// One figure of the intervals' per-rank timing, in milliseconds.
Series from_ranks(const std::vector<MetricsRecord>& steps, double (*field)(const train::RankTiming&), std::string name,
                  const char* color, bool dashed) {
  Series s{std::move(name), color, {}, false, dashed, 1.5};
  for (const auto& r : steps) {
    if (r.ranks) s.points.emplace_back(step_of(r), 1000 * field(*r.ranks));
  }
  return s;
}

// A figure of each epoch's training record (`line` &EpochRecord::train) or test
// record (&EpochRecord::test). x is the optimizer step, or the epoch (`by_step` false).
template <class Field>
Series from_epochs(const std::map<int64_t, EpochRecord>& epochs, std::optional<MetricsRecord> EpochRecord::*line,
                   Field MetricsRecord::*field, std::string name, const char* color, bool by_step, double scale = 1.0) {
  Series s{std::move(name), color, {}, true, false, 2.0};
  for (const auto& [epoch, e] : epochs) {
    const std::optional<MetricsRecord>& record = e.*line;
    if (!record || !((*record).*field)) continue;
    if (by_step && !e.step()) continue;
    s.points.emplace_back(by_step ? *e.step() : static_cast<double>(epoch),
                          static_cast<double>(*((*record).*field)) * scale);
  }
  return s;
}

}  // namespace

std::vector<Figured> make_charts(const Run& run) {
  const auto& m = run.metrics;
  // Unlabeled runs take no optimizer steps: their axis is the epoch.
  const bool by_step = run.labeled;
  const std::string x = by_step ? "optimizer step" : "epoch";
  const std::string interval_note = run.labeled
                                        ? "Thin line: each log interval (train.log_every steps); dots: whole epochs."
                                        : "One dot per epoch (forward passes only: the data set has no labels).";
  std::vector<Figured> charts;
  if (run.labeled) {
    charts.push_back(
        {"Loss",
         interval_note,
         {"Loss",
          x,
          "mean loss per sample",
          {from_steps(m.steps, &MetricsRecord::loss, "train (interval)", kTrainLight),
           from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::loss, "train (epoch)", kTrain, by_step),
           from_epochs(m.epochs, &EpochRecord::test, &MetricsRecord::loss, "test", kTest, by_step)}}});
  }
  if (run.classification) {
    charts.push_back(
        {"Accuracy",
         interval_note,
         {"Accuracy",
          x,
          "accuracy (%)",
          {from_steps(m.steps, &MetricsRecord::accuracy, "train (interval)", kTrainLight, 100.0),
           from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::accuracy, "train (epoch)", kTrain, by_step,
                       100.0),
           from_epochs(m.epochs, &EpochRecord::test, &MetricsRecord::accuracy, "test", kTest, by_step, 100.0)}}});
  }
  charts.push_back(
      {"Throughput",
       interval_note,
       {"Throughput",
        x,
        "training samples/s",
        {from_steps(m.steps, &MetricsRecord::samples_per_s, "interval", kTrainLight),
         from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::samples_per_s, "epoch", kTrain, by_step)}}});
  charts.push_back(
      {"Hardware efficiency",
       "Achieved arithmetic in each epoch's training: 3 x the traced forward FLOPs per sample x samples/s. The log's "
       "run start names the peak it is compared with; metrics.jsonl's peak_share is the share.",
       {"Hardware efficiency",
        x,
        "TFLOP/s",
        {from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::tflops, "epoch", kTrain, by_step)}}});
  if (run.labeled) {  // without labels there is no optimizer
    charts.push_back({"Learning rate",
                      "At the end of each log interval and epoch.",
                      {"Learning rate",
                       x,
                       "learning rate",
                       {from_steps(m.steps, &MetricsRecord::lr, "interval", kTrainLight),
                        from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::lr, "epoch", kTrain, by_step)}}});
  }
  if (run.fp16) {
    charts.push_back(
        {"Loss scale (fp16)",
         "The gradient scaler halves it on inf/NaN gradients and grows it again.",
         {"Loss scale",
          x,
          "loss scale",
          {from_steps(m.steps, &MetricsRecord::loss_scale, "interval", kTrainLight),
           from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::loss_scale, "epoch", kTrain, by_step)}}});
  }

  Chart memory{"GPU memory",
               "epoch",
               "GiB",
               {from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::memory_allocated, "allocated", kTrain, false,
                            1.0 / kGiB),
                from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::memory_reserved, "reserved", kTrainLight,
                            false, 1.0 / kGiB),
                from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::memory_peak, "peak allocated", kTest, false,
                            1.0 / kGiB)}};
  Chart utilization{"GPU utilization", "epoch", "utilization (%)", {}};
  std::map<int64_t, std::vector<const detail::GpuRecord*>> by_gpu;
  for (const auto& [epoch, e] : m.epochs) {
    if (!e.train) continue;
    for (const auto& g : e.train->gpus) by_gpu[g.index].push_back(&g);
  }
  std::size_t color = 0;
  for (const auto& [index, records] : by_gpu) {
    const char* c = kPalette[color++ % kPalette.size()];
    Series mean{fmt::format("cuda:{} mean", index), c, {}, true, false, 2.0};
    Series max{fmt::format("cuda:{} max", index), c, {}, false, true, 1.5};
    Series used{fmt::format("cuda:{} used (NVML)", index), c, {}, true, true, 1.5};
    for (const auto& [epoch, e] : m.epochs) {
      if (!e.train) continue;
      for (const auto& g : e.train->gpus) {
        if (g.index != index) continue;
        const auto x_epoch = static_cast<double>(epoch);
        if (g.util_mean) mean.points.emplace_back(x_epoch, *g.util_mean);
        if (g.util_max) max.points.emplace_back(x_epoch, *g.util_max);
        if (g.memory_used) used.points.emplace_back(x_epoch, static_cast<double>(*g.memory_used) / kGiB);
      }
    }
    utilization.series.push_back(mean);
    utilization.series.push_back(max);
    memory.series.push_back(used);
  }
  charts.push_back({"GPU memory",
                    "LibTorch's caching allocator at the end of each epoch and its peak during it; NVML's figure is "
                    "the whole device, every process.",
                    memory});
  charts.push_back(
      {"GPU utilization",
       fmt::format("Sampled through NVML every train.monitor_ms over each epoch's training and test "
                   "pass; solid: mean, dashed: highest. Below {:.0f}% the log names the likely bottleneck.",
                   kLowUtilization),
       utilization});
  charts.push_back(
      {"Ranks (ddp)",
       "Per optimizer step over each log interval. Ranks step in lockstep, so a slow rank (a straggler) shows as "
       "the others' collective wait (highest, dashed) while its own stays lowest; the log names it and its host.",
       {"Ranks",
        x,
        "milliseconds per step",
        {from_ranks(
             m.steps, [](const train::RankTiming& t) { return t.step_s.mean; }, "step (mean)", kTrain, false),
         from_ranks(
             m.steps, [](const train::RankTiming& t) { return t.collective_wait_s.max; }, "collective wait (highest)",
             kTest, true),
         from_ranks(
             m.steps, [](const train::RankTiming& t) { return t.collective_wait_s.min; }, "collective wait (lowest)",
             kTest, false),
         from_ranks(
             m.steps, [](const train::RankTiming& t) { return t.data_wait_s.max; }, "data wait (highest)", kPalette[1],
             true)}}});
  charts.push_back(
      {"Loader wait",
       "Seconds the training thread waited for batches in each epoch, beside the epoch's training time.",
       {"Loader wait",
        "epoch",
        "seconds",
        {from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::loader_wait_s, "loader wait", kTest, false),
         from_epochs(m.epochs, &EpochRecord::train, &MetricsRecord::epoch_s, "epoch training time", kTrain, false)}}});
  charts.erase(
      std::remove_if(charts.begin(), charts.end(), [](const Figured& f) { return !detail::has_data(f.chart); }),
      charts.end());
  return charts;
}

}  // namespace gputrain::report::detail
