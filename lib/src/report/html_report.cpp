#include "gputrain/report/html_report.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/device/versions.h"
#include "gputrain/report/gpu_monitor.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_info.h"
#include "metrics_log.h"
#include "svg_chart.h"

namespace gputrain::report {

namespace {

namespace fs = std::filesystem;
using detail::Chart;
using detail::EpochRecord;
using detail::Figure;
using detail::html_escape;
using detail::Series;
using detail::StepRecord;
using Json = nlohmann::ordered_json;

constexpr const char* kTrainLight = "#9ecae1";
constexpr const char* kTrain = "#1f77b4";
constexpr const char* kTest = "#d62728";
const std::vector<const char*> kPalette{"#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                        "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Everything the page is made from.
struct Run {
  fs::path dir;
  std::string name;
  std::optional<RunInfo> info;
  detail::MetricsLog metrics;
  std::optional<std::string> config_text;
  std::optional<Json> device;
  std::vector<std::string> notes;  // plain text, escaped when written
  bool labeled = true;
  bool classification = true;
  bool fp16 = false;
};

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string number(Figure f, int decimals) { return f ? fmt::format("{:.{}f}", *f, decimals) : "–"; }
std::string percent(Figure f) { return f ? fmt::format("{:.2f}%", 100.0 * *f) : "–"; }
std::string general(Figure f) { return f ? fmt::format("{:.6g}", *f) : "–"; }
std::string gib(Figure bytes) { return bytes ? fmt::format("{:.2f}", *bytes / kGiB) : "–"; }

std::string duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto total = static_cast<int64_t>(std::lround(seconds));
  if (total < 3600) return fmt::format("{} min {:02} s", total / 60, total % 60);
  return fmt::format("{} h {:02} min", total / 3600, (total % 3600) / 60);
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  const std::string& css_class = "") {
  std::string out = css_class.empty() ? "<table>" : fmt::format(R"(<table class="{}">)", css_class);
  out += "<thead><tr>";
  for (const auto& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& c : row) out += "<td>" + html_escape(c) + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

// ---- reading the run directory ----

Run load_run(const fs::path& dir) {
  const RunPaths paths = run_paths(dir);
  if (!fs::is_regular_file(paths.metrics)) {
    throw UserError(
        fmt::format("{}: no metrics.jsonl here; give the directory a `gputrain train` run wrote "
                    "(<output.dir>/<name>/)",
                    dir.string()));
  }
  Run run;
  run.dir = dir;
  run.name = fs::absolute(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  run.metrics = detail::read_metrics_log(paths.metrics);
  if (fs::exists(paths.run_info)) {
    try {
      run.info = read_run_info(paths.run_info);
      if (!run.info->name.empty()) run.name = run.info->name;
    } catch (const UserError& e) {
      run.notes.push_back(std::string(e.what()) + ". Status, strategy and batch splits are unknown.");
    }
  } else {
    run.notes.push_back("There is no run.json, so the run's status, strategy and batch splits are unknown.");
  }
  run.config_text = read_text(paths.config);
  if (!run.config_text) run.notes.push_back("There is no config.yaml in the run directory.");
  if (const auto text = read_text(paths.device_report)) {
    Json device = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (device.is_object()) {
      run.device = device;
    } else {
      run.notes.push_back("device.json is not a JSON object; the device report is left out.");
    }
  } else {
    run.notes.push_back("There is no device.json, so the device report is missing.");
  }

  const auto& epochs = run.metrics.epochs;
  if (run.info && !run.info->task.empty()) {
    run.labeled = run.info->task != "unlabeled";
    run.classification = run.info->task == "classification";
  } else {  // no run.json: guess from what was logged (unlabeled runs log no intervals and no tests)
    const auto& steps = run.metrics.steps;
    run.labeled =
        !steps.empty() || std::any_of(epochs.begin(), epochs.end(), [](const auto& e) { return e.second.has_test; });
    run.classification =
        std::any_of(steps.begin(), steps.end(), [](const StepRecord& s) { return s.accuracy.value_or(0) > 0; }) ||
        std::any_of(epochs.begin(), epochs.end(),
                    [](const auto& e) { return e.second.train_accuracy.value_or(0) > 0; });
  }
  run.fp16 = run.info ? run.info->amp == config::AmpMode::kFp16
                      : std::any_of(epochs.begin(), epochs.end(),
                                    [](const auto& e) { return e.second.loss_scale.value_or(1) != 1; });
  return run;
}

struct Status {
  std::string label;
  std::string css;
};

Status run_status(const Run& run) {
  if (!run.info) return {"status unknown", "unknown"};
  if (run.info->status == "finished") return {"finished", "ok"};
  if (run.info->status == "failed") return {"failed", "bad"};
  if (run.info->status == "interrupted") return {"interrupted", "warn"};
  return {"did not finish", "warn"};
}

// What the reader must know to read the charts right.
std::vector<std::string> partial_run_notes(const Run& run) {
  std::vector<std::string> notes;
  const auto& m = run.metrics;
  if (run.info && run.info->status == "failed") notes.push_back("The run failed: " + run.info->error);
  if (run.info && run.info->status == "interrupted") notes.push_back("The run was stopped: " + run.info->error);
  if (run.info && run.info->status == "running") {
    notes.push_back(
        "run.json records no end: the process was killed or crashed, or it is still running. "
        "The report shows what it logged.");
  }
  if (m.steps.empty() && m.epochs.empty()) {
    notes.push_back("metrics.jsonl holds no records: the run stopped before its first log interval.");
    return notes;
  }
  int64_t done = 0;
  for (const auto& [epoch, e] : m.epochs) {
    if (e.has_train) done = std::max(done, epoch);
  }
  if (run.info && run.info->epochs > 0 && done < run.info->epochs) {
    notes.push_back(fmt::format("{} of {} epochs completed.", done, run.info->epochs));
  }
  if (!m.epochs.empty()) {
    const EpochRecord& last = m.epochs.rbegin()->second;
    if (run.labeled && last.has_train && !last.has_test) {
      notes.push_back(fmt::format("Epoch {} has no test record: the run stopped during its test pass.", last.epoch));
    }
  }
  const double last_epoch_step = m.epochs.empty() ? 0.0 : m.epochs.rbegin()->second.step.value_or(0.0);
  const auto later = std::count_if(m.steps.begin(), m.steps.end(),
                                   [&](const StepRecord& s) { return s.epoch > done && s.step > last_epoch_step; });
  if (later > 0) {
    notes.push_back(
        fmt::format("{} log interval(s) of epoch {} were recorded before the run stopped; they end the "
                    "step curves.",
                    later, done + 1));
  }
  return notes;
}

// ---- charts ----

Series from_steps(const std::vector<StepRecord>& steps, Figure StepRecord::*field, std::string name, const char* color,
                  double scale = 1.0) {
  Series s{std::move(name), color, {}, false, false, 1.2};
  for (const auto& r : steps) {
    if (r.*field) s.points.emplace_back(r.step, *(r.*field) * scale);
  }
  return s;
}

// x is the optimizer step, or the epoch (`by_step` false).
Series from_epochs(const std::map<int64_t, EpochRecord>& epochs, Figure EpochRecord::*field, std::string name,
                   const char* color, bool by_step, double scale = 1.0) {
  Series s{std::move(name), color, {}, true, false, 2.0};
  for (const auto& [epoch, e] : epochs) {
    if (!(e.*field)) continue;
    if (by_step && !e.step) continue;
    s.points.emplace_back(by_step ? *e.step : static_cast<double>(epoch), *(e.*field) * scale);
  }
  return s;
}

struct Figured {
  std::string caption;
  std::string note;
  Chart chart;
};

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
    charts.push_back({"Loss",
                      interval_note,
                      {"Loss",
                       x,
                       "mean loss per sample",
                       {from_steps(m.steps, &StepRecord::loss, "train (interval)", kTrainLight),
                        from_epochs(m.epochs, &EpochRecord::train_loss, "train (epoch)", kTrain, by_step),
                        from_epochs(m.epochs, &EpochRecord::test_loss, "test", kTest, by_step)}}});
  }
  if (run.classification) {
    charts.push_back({"Accuracy",
                      interval_note,
                      {"Accuracy",
                       x,
                       "accuracy (%)",
                       {from_steps(m.steps, &StepRecord::accuracy, "train (interval)", kTrainLight, 100.0),
                        from_epochs(m.epochs, &EpochRecord::train_accuracy, "train (epoch)", kTrain, by_step, 100.0),
                        from_epochs(m.epochs, &EpochRecord::test_accuracy, "test", kTest, by_step, 100.0)}}});
  }
  charts.push_back({"Throughput",
                    interval_note,
                    {"Throughput",
                     x,
                     "training samples/s",
                     {from_steps(m.steps, &StepRecord::samples_per_s, "interval", kTrainLight),
                      from_epochs(m.epochs, &EpochRecord::samples_per_s, "epoch", kTrain, by_step)}}});
  if (run.labeled) {  // without labels there is no optimizer
    charts.push_back({"Learning rate",
                      "At the end of each log interval and epoch.",
                      {"Learning rate",
                       x,
                       "learning rate",
                       {from_steps(m.steps, &StepRecord::lr, "interval", kTrainLight),
                        from_epochs(m.epochs, &EpochRecord::lr, "epoch", kTrain, by_step)}}});
  }
  if (run.fp16) {
    charts.push_back({"Loss scale (fp16)",
                      "The gradient scaler halves it on inf/NaN gradients and grows it again.",
                      {"Loss scale",
                       x,
                       "loss scale",
                       {from_steps(m.steps, &StepRecord::loss_scale, "interval", kTrainLight),
                        from_epochs(m.epochs, &EpochRecord::loss_scale, "epoch", kTrain, by_step)}}});
  }

  Chart memory{"GPU memory",
               "epoch",
               "GiB",
               {from_epochs(m.epochs, &EpochRecord::memory_allocated, "allocated", kTrain, false, 1.0 / kGiB),
                from_epochs(m.epochs, &EpochRecord::memory_reserved, "reserved", kTrainLight, false, 1.0 / kGiB),
                from_epochs(m.epochs, &EpochRecord::memory_peak, "peak allocated", kTest, false, 1.0 / kGiB)}};
  Chart utilization{"GPU utilization", "epoch", "utilization (%)", {}};
  std::map<int64_t, std::vector<const detail::GpuRecord*>> by_gpu;
  for (const auto& [epoch, e] : m.epochs) {
    for (const auto& g : e.gpus) by_gpu[g.index].push_back(&g);
  }
  std::size_t color = 0;
  for (const auto& [index, records] : by_gpu) {
    const char* c = kPalette[color++ % kPalette.size()];
    Series mean{fmt::format("cuda:{} mean", index), c, {}, true, false, 2.0};
    Series max{fmt::format("cuda:{} max", index), c, {}, false, true, 1.5};
    Series used{fmt::format("cuda:{} used (NVML)", index), c, {}, true, true, 1.5};
    for (const auto& [epoch, e] : m.epochs) {
      for (const auto& g : e.gpus) {
        if (g.index != index) continue;
        const auto x_epoch = static_cast<double>(epoch);
        if (g.util_mean) mean.points.emplace_back(x_epoch, *g.util_mean);
        if (g.util_max) max.points.emplace_back(x_epoch, *g.util_max);
        if (g.memory_used) used.points.emplace_back(x_epoch, *g.memory_used / kGiB);
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
  charts.push_back({"Loader wait",
                    "Seconds the training thread waited for batches in each epoch, beside the epoch's training time.",
                    {"Loader wait",
                     "epoch",
                     "seconds",
                     {from_epochs(m.epochs, &EpochRecord::loader_wait_s, "loader wait", kTest, false),
                      from_epochs(m.epochs, &EpochRecord::epoch_s, "epoch training time", kTrain, false)}}});
  charts.erase(
      std::remove_if(charts.begin(), charts.end(), [](const Figured& f) { return !detail::has_data(f.chart); }),
      charts.end());
  return charts;
}

// ---- sections ----

std::string summary_section(const Run& run) {
  const auto& m = run.metrics;
  std::vector<std::pair<std::string, std::string>> cards;
  int64_t done = 0;
  Figure elapsed;
  double step = 0;
  for (const auto& s : m.steps) {
    step = std::max(step, s.step);
    if (s.elapsed_s) elapsed = std::max(elapsed.value_or(0.0), *s.elapsed_s);
  }
  const EpochRecord* last_test = nullptr;
  const EpochRecord* best_test = nullptr;
  double samples = 0;
  double training_s = 0;
  for (const auto& [epoch, e] : m.epochs) {
    if (e.has_train) done = std::max(done, epoch);
    if (e.elapsed_s) elapsed = std::max(elapsed.value_or(0.0), *e.elapsed_s);
    if (e.step) step = std::max(step, *e.step);
    if (e.has_test) {
      last_test = &e;
      if (run.classification && e.test_accuracy &&
          (!best_test || *e.test_accuracy > best_test->test_accuracy.value_or(-1))) {
        best_test = &e;
      }
    }
    if (e.samples && e.epoch_s) {
      samples += *e.samples;
      training_s += *e.epoch_s;
    }
  }
  cards.emplace_back("epochs", run.info && run.info->epochs > 0 ? fmt::format("{} / {}", done, run.info->epochs)
                                                                : std::to_string(done));
  if (run.labeled) cards.emplace_back("optimizer steps", fmt::format("{:.0f}", step));
  if (last_test && run.classification) {
    cards.emplace_back("test accuracy",
                       fmt::format("{} (epoch {})", percent(last_test->test_accuracy), last_test->epoch));
  }
  if (best_test) {
    cards.emplace_back("best test accuracy",
                       fmt::format("{} (epoch {})", percent(best_test->test_accuracy), best_test->epoch));
  }
  if (last_test) cards.emplace_back("test loss", number(last_test->test_loss, 4));
  if (training_s > 0) cards.emplace_back("samples/s (all epochs)", fmt::format("{:.0f}", samples / training_s));
  if (elapsed) cards.emplace_back("time", duration(*elapsed));
  std::string out = R"(<section class="cards">)";
  for (const auto& [label, value] : cards) {
    out += fmt::format(R"(<div class="card"><div class="label">{}</div><div class="value">{}</div></div>)",
                       html_escape(label), html_escape(value));
  }
  return out + "</section>";
}

// The newest epoch's test split by class: accuracy per class, and the
// confusion matrix (rows: true class, columns: predicted).
std::string classes_section(const std::map<int64_t, EpochRecord>& epochs) {
  const auto last =
      std::find_if(epochs.rbegin(), epochs.rend(), [](const auto& e) { return !e.second.confusion.empty(); });
  if (last == epochs.rend()) return "";
  const auto& matrix = last->second.confusion;
  std::vector<std::string> header{"true \\ predicted"};
  for (std::size_t c = 0; c < matrix.size(); ++c) header.push_back(std::to_string(c));
  header.push_back("accuracy");
  std::vector<std::vector<std::string>> rows;
  for (std::size_t c = 0; c < matrix.size(); ++c) {
    std::vector<std::string> row{std::to_string(c)};
    int64_t total = 0;
    for (int64_t n : matrix[c]) {
      row.push_back(std::to_string(n));
      total += n;
    }
    row.push_back(total > 0 ? percent(static_cast<double>(matrix[c][c]) / static_cast<double>(total)) : "–");
    rows.push_back(row);
  }
  return fmt::format(
             "<h3>Test split by class (epoch {})</h3><p>Rows are the true classes, columns the predicted "
             "ones; the last column is each class's accuracy.</p>",
             last->first) +
         table(header, rows, "numbers confusion");
}

std::string epochs_section(const Run& run) {
  const auto& epochs = run.metrics.epochs;
  if (epochs.empty()) return "";
  const bool gpu = std::any_of(epochs.begin(), epochs.end(), [](const auto& e) { return !e.second.gpus.empty(); });
  const bool memory =
      std::any_of(epochs.begin(), epochs.end(), [](const auto& e) { return e.second.memory_peak.has_value(); });
  std::vector<std::string> header{"epoch"};
  if (run.labeled) header.insert(header.end(), {"step", "train loss"});
  if (run.classification) header.push_back("train accuracy");
  if (run.labeled) header.push_back("test loss");
  if (run.classification) header.push_back("test accuracy");
  header.insert(header.end(), {"samples/s", "training time (s)", "loader wait (s)"});
  if (run.labeled) header.push_back("lr");
  if (run.fp16) header.insert(header.end(), {"loss scale", "skipped steps"});
  if (memory) header.push_back("peak memory (GiB)");
  if (gpu) header.insert(header.end(), {"GPU util mean", "GPU util max"});
  std::vector<std::vector<std::string>> rows;
  for (const auto& [epoch, e] : epochs) {
    std::vector<std::string> row{std::to_string(epoch)};
    if (run.labeled) row.insert(row.end(), {number(e.step, 0), number(e.train_loss, 4)});
    if (run.classification) row.push_back(percent(e.train_accuracy));
    if (run.labeled) row.push_back(e.has_test ? number(e.test_loss, 4) : "no test record");
    if (run.classification) row.push_back(e.has_test ? percent(e.test_accuracy) : "–");
    row.insert(row.end(), {number(e.samples_per_s, 0), number(e.epoch_s, 2), number(e.loader_wait_s, 2)});
    if (run.labeled) row.push_back(general(e.lr));
    if (run.fp16) row.insert(row.end(), {general(e.loss_scale), number(e.skipped_steps, 0)});
    if (memory) row.push_back(gib(e.memory_peak));
    if (gpu) {
      double mean = 0, max = 0;
      for (const auto& g : e.gpus) {
        mean += g.util_mean.value_or(0) / static_cast<double>(e.gpus.size());
        max = std::max(max, g.util_max.value_or(0));
      }
      row.push_back(e.gpus.empty() ? "–" : fmt::format("{:.0f}%", mean));
      row.push_back(e.gpus.empty() ? "–" : fmt::format("{:.0f}%", max));
    }
    rows.push_back(row);
  }
  std::string out = "<h2>Epochs</h2>" + table(header, rows, "numbers");
  out += classes_section(epochs);
  if (gpu) {
    std::vector<std::vector<std::string>> gpu_rows;
    for (const auto& [epoch, e] : epochs) {
      for (const auto& g : e.gpus) {
        gpu_rows.push_back({std::to_string(epoch), fmt::format("cuda:{}", g.index), number(g.util_mean, 1),
                            number(g.util_max, 0), gib(g.memory_used), number(g.power_w, 0),
                            number(g.temperature_c, 0)});
      }
    }
    out += "<h3>GPU activity (NVML)</h3>" + table({"epoch", "GPU", "util mean (%)", "util max (%)", "memory used (GiB)",
                                                   "power (W)", "temperature (°C)"},
                                                  gpu_rows, "numbers");
  }
  return out;
}

std::string splits_section(const RunInfo& info) {
  if (info.full_split.empty()) return "";
  std::string out = "<h2>Batch splits</h2>";
  out += fmt::format(
      "<p>Strategy <b>{}</b> over {} replica{} ({}). <code>data.batch_size</code> {} per optimizer step{}; each "
      "micro-batch of {} rows is shared by PyTorch's scatter rule (chunks of ceil(B/n) rows, the last one shorter), "
      "and the epoch's last micro-batch has {} rows.</p>",
      html_escape(info.strategy), info.replicas.size(), info.replicas.size() == 1 ? "" : "s",
      html_escape(info.strategy_reason), info.batch_size,
      info.accumulation_steps > 1 ? fmt::format(" in {} micro-batches", info.accumulation_steps) : "", info.micro_batch,
      info.last_micro_batch);
  std::vector<std::vector<std::string>> rows;
  const std::size_t n = std::max({info.replicas.size(), info.full_split.size(), info.last_split.size()});
  auto rows_of = [](const std::vector<parallel::ReplicaSplit>& splits, std::size_t i) {
    return i < splits.size() ? fmt::format("{} [{}, {})", splits[i].rows(), splits[i].begin, splits[i].end)
                             : std::string("0 (idle)");
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::string device = i < info.replicas.size() ? info.replicas[i] : "";
    rows.push_back({std::to_string(i), device, rows_of(info.full_split, i), rows_of(info.last_split, i)});
  }
  return out + table({"replica", "device", fmt::format("rows of a full micro-batch ({})", info.micro_batch),
                      fmt::format("rows of the last micro-batch ({})", info.last_micro_batch)},
                     rows, "numbers");
}

std::string run_section(const RunInfo& info) {
  std::vector<std::vector<std::string>> rows{
      {"status", info.status},
      {"started", info.started},
      {"ended", info.ended.empty() ? "–" : info.ended},
      {"device", info.device},
      {"strategy", info.strategy + (info.strategy_reason.empty() ? "" : " (" + info.strategy_reason + ")")},
      {"replicas", fmt::format("{}", fmt::join(info.replicas, ", "))},
      {"task", info.task},
      {"mixed precision", config::word(info.amp)},
      {"epochs planned", std::to_string(info.epochs)},
      {"training samples", std::to_string(info.train_samples)},
      {"batch size (per optimizer step)", std::to_string(info.batch_size)},
      {"accumulation steps", std::to_string(info.accumulation_steps)},
      {"steps per epoch", std::to_string(info.steps_per_epoch)}};
  if (!info.error.empty()) rows.insert(rows.begin() + 1, std::vector<std::string>{"error", info.error});
  return "<h2>Run</h2>" + table({"", ""}, rows, "keys");
}

std::string json_value(const std::string& key, const Json& v) {
  if (v.is_null()) return "–";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>().empty() ? "–" : v.get<std::string>();
  if (v.is_number() && key.size() > 6 && key.compare(key.size() - 6, 6, "_bytes") == 0) {
    return fmt::format("{:.1f} GiB", v.get<double>() / kGiB);
  }
  return v.dump();
}

std::string device_section(const Json& device) {
  std::vector<std::vector<std::string>> rows;
  std::string arrays;
  for (const auto& [key, value] : device.items()) {
    if (!value.is_array()) {
      rows.push_back({key, value.is_object() ? value.dump() : json_value(key, value)});
      continue;
    }
    std::vector<std::string> columns;
    for (const auto& item : value) {
      if (!item.is_object()) continue;
      for (const auto& [column, ignored] : item.items()) {
        if (std::find(columns.begin(), columns.end(), column) == columns.end()) columns.push_back(column);
      }
    }
    std::vector<std::vector<std::string>> item_rows;
    for (const auto& item : value) {
      std::vector<std::string> row;
      for (const auto& column : columns) {
        row.push_back(item.is_object() && item.contains(column) ? json_value(column, item[column]) : "–");
      }
      item_rows.push_back(row);
    }
    arrays += fmt::format("<h3>{}</h3>", html_escape(key)) +
              (item_rows.empty() ? std::string("<p>none</p>") : table(columns, item_rows));
  }
  return "<h2>Devices</h2><p>As <code>gputrain info --json</code> reported them when the run started.</p>" +
         table({"", ""}, rows, "keys") + arrays;
}

constexpr const char* kStyle = R"(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d232a; background: #f6f7f9;
       margin: 0; }
main { max-width: 1360px; margin: 0 auto; padding: 24px 28px 40px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 10px; border-bottom: 1px solid #d8dde3; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: #56606b; margin: 0 0 14px; }
.badge { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 13px; font-weight: 600;
         vertical-align: middle; margin-left: 8px; }
.badge.ok { background: #dff3e4; color: #14692d; } .badge.warn { background: #fff1d6; color: #8a5300; }
.badge.bad { background: #fde0e0; color: #a01616; } .badge.unknown { background: #e8ebef; color: #444; }
.notes { background: #fff8e6; border: 1px solid #f0d9a0; border-radius: 6px; padding: 8px 14px 8px 30px; }
.notes li { margin: 3px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.card .label { color: #56606b; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
.card .value { font-size: 18px; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px; }
figure { margin: 0; background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 10px 12px; }
figcaption { font-weight: 600; margin-bottom: 2px; }
figure p { color: #56606b; font-size: 12px; margin: 4px 0 0; }
svg.chart { width: 100%; height: auto; display: block; font: 11px system-ui, sans-serif; }
svg.chart .plot { fill: #fcfcfd; stroke: #c9d0d8; }
svg.chart .grid { stroke: #e6e9ed; }
svg.chart .tick { fill: #56606b; } svg.chart .axis { fill: #1d232a; font-size: 12px; }
svg.chart .legend { fill: #1d232a; }
table { border-collapse: collapse; background: #fff; margin: 6px 0; font-size: 13px; }
th, td { border: 1px solid #dde2e8; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
table.numbers td { text-align: right; font-variant-numeric: tabular-nums; }
table.keys td:first-child { color: #56606b; white-space: nowrap; }
table.keys thead { display: none; }
pre { background: #fff; border: 1px solid #dde2e8; border-radius: 6px; padding: 10px 14px; overflow-x: auto;
      font-size: 12.5px; }
footer { color: #7a838d; font-size: 12px; margin-top: 36px; }
)";

std::string render(const Run& run) {
  const Status status = run_status(run);
  std::vector<std::string> notes = partial_run_notes(run);
  notes.insert(notes.end(), run.metrics.notes.begin(), run.metrics.notes.end());
  notes.insert(notes.end(), run.notes.begin(), run.notes.end());

  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += fmt::format("<title>{} · gputrain report</title>\n<style>{}</style>\n</head>\n<body>\n<main>\n",
                      html_escape(run.name), kStyle);
  html += fmt::format(R"(<h1>{}<span class="badge {}">{}</span></h1>)", html_escape(run.name), status.css,
                      html_escape(status.label));
  if (run.info) {
    html += fmt::format(R"(<p class="sub">Started {}{} · {} · strategy {} · {}</p>)", html_escape(run.info->started),
                        run.info->ended.empty() ? "" : ", ended " + html_escape(run.info->ended),
                        html_escape(run.info->device), html_escape(run.info->strategy),
                        run.info->amp == config::AmpMode::kOff ? "fp32" : config::word(run.info->amp));
  }
  if (!notes.empty()) {
    html += R"(<ul class="notes">)";
    for (const auto& note : notes) html += "<li>" + html_escape(note) + "</li>";
    html += "</ul>";
  }
  html += summary_section(run);

  const std::vector<Figured> charts = make_charts(run);
  if (!charts.empty()) {
    html += R"(<h2>Curves</h2><div class="charts">)";
    for (const auto& f : charts) {
      html += fmt::format("<figure><figcaption>{}</figcaption>{}<p>{}</p></figure>", html_escape(f.caption),
                          detail::render_svg(f.chart), html_escape(f.note));
    }
    html += "</div>";
  }
  html += epochs_section(run);
  if (run.info) html += splits_section(*run.info) + run_section(*run.info);
  if (run.config_text) {
    html +=
        "<h2>Configuration</h2><p>The resolved config (config.yaml); <code>gputrain train --config</code> "
        "accepts it as is.</p><pre>" +
        html_escape(*run.config_text) + "</pre>";
  }
  if (run.device) html += device_section(*run.device);
  html += fmt::format("<footer>Written by gputrain {} on {} from {}.</footer>\n</main>\n</body>\n</html>\n",
                      html_escape(device::version()),
                      fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::time(nullptr))),
                      html_escape(fs::absolute(run.dir).lexically_normal().string()));
  return html;
}

}  // namespace

void write_html_report(const fs::path& run_dir, const fs::path& out) {
  write_atomically(out, render(load_run(run_dir)));
}

}  // namespace gputrain::report
