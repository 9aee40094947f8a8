#include "html_sections.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "gputrain/step/running_sums.h"
#include "svg_chart.h"

namespace gputrain::report::detail {

namespace {

using Json = nlohmann::ordered_json;

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

// Past step::kDenseConfusionClasses classes: the commonest confusions and the
// classes of lowest accuracy, a few rows whatever the classes.
std::string bounded_classes_section(int64_t epoch, const MetricsRecord& test,
                                    const std::function<std::string(std::size_t)>& label) {
  std::vector<std::vector<std::string>> confused;
  for (const step::Confusion& c : test.top_confusions) {
    confused.push_back({label(static_cast<std::size_t>(c.truth)), label(static_cast<std::size_t>(c.predicted)),
                        std::to_string(c.count)});
  }
  std::vector<std::size_t> lowest;
  for (std::size_t c = 0; c < test.per_class_accuracy.size(); ++c) {
    if (test.per_class_accuracy[c]) lowest.push_back(c);
  }
  const std::size_t shown = std::min(step::kTopConfusions, lowest.size());
  std::partial_sort(lowest.begin(), lowest.begin() + static_cast<std::ptrdiff_t>(shown), lowest.end(),
                    [&](std::size_t a, std::size_t b) {
                      return std::tie(*test.per_class_accuracy[a], a) < std::tie(*test.per_class_accuracy[b], b);
                    });
  std::vector<std::vector<std::string>> worst;
  for (std::size_t i = 0; i < shown; ++i)
    worst.push_back({label(lowest[i]), percent(test.per_class_accuracy[lowest[i]])});
  return fmt::format(
             "<h3>Test split by class (epoch {})</h3><p>{} classes, more than the {} a whole confusion matrix is "
             "kept for: the commonest confusions and the {} classes of lowest accuracy (metrics.jsonl holds every "
             "class's).</p>",
             epoch, test.per_class_accuracy.size(), step::kDenseConfusionClasses, shown) +
         table({"true", "predicted", "count"}, confused, "numbers") + table({"class", "accuracy"}, worst, "numbers");
}

// The newest epoch's test split by class: accuracy per class, and the
// confusion matrix (rows: true class, columns: predicted) or, for many
// classes, its commonest confusions; each class by its index and, where the
// run recorded them (run.json), its name.
std::string classes_section(const std::map<int64_t, EpochRecord>& epochs, const std::vector<std::string>& names) {
  const auto last = std::find_if(epochs.rbegin(), epochs.rend(), [](const auto& e) {
    return e.second.test && (!e.second.test->confusion.empty() || !e.second.test->per_class_accuracy.empty());
  });
  if (last == epochs.rend()) return "";
  const auto& matrix = last->second.test->confusion;
  auto label = [&](std::size_t c) { return c < names.size() ? fmt::format("{} {}", c, names[c]) : std::to_string(c); };
  if (matrix.empty()) return bounded_classes_section(last->first, *last->second.test, label);
  std::vector<std::string> header{"true \\ predicted"};
  for (std::size_t c = 0; c < matrix.size(); ++c) header.push_back(label(c));
  header.push_back("accuracy");
  std::vector<std::vector<std::string>> rows;
  for (std::size_t c = 0; c < matrix.size(); ++c) {
    std::vector<std::string> row{label(c)};
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

std::string json_value(const std::string& key, const Json& v) {
  if (v.is_null()) return "–";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>().empty() ? "–" : v.get<std::string>();
  if (v.is_number() && key.size() > 6 && key.compare(key.size() - 6, 6, "_bytes") == 0) {
    return fmt::format("{:.1f} GiB", v.get<double>() / kGiB);
  }
  return v.dump();
}

}  // namespace

std::string summary_section(const Run& run) {
  const auto& m = run.metrics;
  std::vector<std::pair<std::string, std::string>> cards;
  int64_t done = 0;
  Figure elapsed;
  double step = 0;
  for (const auto& s : m.steps) {
    step = std::max(step, as_figure(s.step).value_or(0));
    if (s.elapsed_s) elapsed = std::max(elapsed.value_or(0.0), *s.elapsed_s);
  }
  const MetricsRecord* last_test = nullptr;
  const MetricsRecord* best_test = nullptr;
  double samples = 0;
  double training_s = 0;
  for (const auto& [epoch, e] : m.epochs) {
    if (e.step()) step = std::max(step, *e.step());
    if (e.train) {
      done = std::max(done, epoch);
      if (e.train->elapsed_s) elapsed = std::max(elapsed.value_or(0.0), *e.train->elapsed_s);
      if (e.train->samples && e.train->epoch_s) {
        samples += static_cast<double>(*e.train->samples);
        training_s += *e.train->epoch_s;
      }
    }
    if (e.test) {
      last_test = &*e.test;
      if (run.classification && e.test->accuracy &&
          (!best_test || *e.test->accuracy > best_test->accuracy.value_or(-1))) {
        best_test = &*e.test;
      }
    }
  }
  cards.emplace_back("epochs", run.info && run.info->epochs > 0 ? fmt::format("{} / {}", done, run.info->epochs)
                                                                : std::to_string(done));
  if (run.labeled) cards.emplace_back("optimizer steps", fmt::format("{:.0f}", step));
  if (last_test && run.classification) {
    cards.emplace_back("test accuracy", fmt::format("{} (epoch {})", percent(last_test->accuracy), last_test->epoch));
  }
  if (best_test) {
    cards.emplace_back("best test accuracy",
                       fmt::format("{} (epoch {})", percent(best_test->accuracy), best_test->epoch));
  }
  if (last_test) cards.emplace_back("test loss", number(last_test->loss, 4));
  if (training_s > 0) cards.emplace_back("samples/s (all epochs)", fmt::format("{:.0f}", samples / training_s));
  if (elapsed) cards.emplace_back("time", duration(*elapsed));
  std::string out = R"(<section class="cards">)";
  for (const auto& [label, value] : cards) {
    out += fmt::format(R"(<div class="card"><div class="label">{}</div><div class="value">{}</div></div>)",
                       html_escape(label), html_escape(value));
  }
  return out + "</section>";
}

std::string epochs_section(const Run& run) {
  const auto& epochs = run.metrics.epochs;
  if (epochs.empty()) return "";
  const bool gpu = std::any_of(epochs.begin(), epochs.end(),
                               [](const auto& e) { return e.second.train && !e.second.train->gpus.empty(); });
  const bool memory = std::any_of(epochs.begin(), epochs.end(),
                                  [](const auto& e) { return e.second.train && e.second.train->memory_peak; });
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
    const MetricsRecord train = e.train.value_or(MetricsRecord{});  // an epoch cut short shows its gaps as "–"
    std::vector<std::string> row{std::to_string(epoch)};
    if (run.labeled) row.insert(row.end(), {number(e.step(), 0), number(train.loss, 4)});
    if (run.classification) row.push_back(percent(train.accuracy));
    if (run.labeled) row.push_back(e.test ? number(e.test->loss, 4) : "no test record");
    if (run.classification) row.push_back(e.test ? percent(e.test->accuracy) : "–");
    row.insert(row.end(), {number(train.samples_per_s, 0), number(train.epoch_s, 2), number(train.loader_wait_s, 2)});
    if (run.labeled) row.push_back(general(train.lr));
    if (run.fp16) row.insert(row.end(), {general(train.loss_scale), number(as_figure(train.skipped_steps), 0)});
    if (memory) row.push_back(gib(as_figure(train.memory_peak)));
    if (gpu) {
      double mean = 0, max = 0;
      for (const auto& g : train.gpus) {
        mean += g.util_mean.value_or(0) / static_cast<double>(train.gpus.size());
        max = std::max(max, g.util_max.value_or(0));
      }
      row.push_back(train.gpus.empty() ? "–" : fmt::format("{:.0f}%", mean));
      row.push_back(train.gpus.empty() ? "–" : fmt::format("{:.0f}%", max));
    }
    rows.push_back(row);
  }
  std::string out = "<h2>Epochs</h2>" + table(header, rows, "numbers");
  out += classes_section(epochs, run.info ? run.info->class_names : std::vector<std::string>{});
  if (gpu) {
    std::vector<std::vector<std::string>> gpu_rows;
    for (const auto& [epoch, e] : epochs) {
      if (!e.train) continue;
      for (const auto& g : e.train->gpus) {
        gpu_rows.push_back({std::to_string(epoch), fmt::format("cuda:{}", g.index), number(g.util_mean, 1),
                            number(g.util_max, 0), gib(as_figure(g.memory_used)), number(g.power_w, 0),
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
      {"status", config::word(info.status)},
      {"started", info.started},
      {"ended", info.ended.empty() ? "–" : info.ended},
      {"device", info.device},
      {"strategy", info.strategy + (info.strategy_reason.empty() ? "" : " (" + info.strategy_reason + ")")},
      {"replicas", fmt::format("{}", fmt::join(info.replicas, ", "))},
      {"task", info.task ? config::word(*info.task) : "–"},
      {"mixed precision", config::word(info.amp)},
      {"epochs planned", std::to_string(info.epochs)},
      {"training samples", std::to_string(info.train_samples)},
      {"batch size (per optimizer step)", std::to_string(info.batch_size)},
      {"accumulation steps", std::to_string(info.accumulation_steps)},
      {"steps per epoch", std::to_string(info.steps_per_epoch)}};
  if (info.target_accuracy > 0) {
    rows.push_back({"target accuracy",
                    info.target ? fmt::format("{:.2f}%, reached at epoch {} (step {}) with {:.2f}%: {:.2f} s of "
                                              "training ({:.2f} s wall)",
                                              100 * info.target_accuracy, info.target->epoch, info.target->step,
                                              100 * info.target->accuracy, info.target->train_s, info.target->wall_s)
                                : fmt::format("{:.2f}%, not reached", 100 * info.target_accuracy)});
  }
  if (!info.ended_early.empty()) rows.push_back({"ended early", info.ended_early});
  if (!info.error.empty()) rows.insert(rows.begin() + 1, std::vector<std::string>{"error", info.error});
  return "<h2>Run</h2>" + table({"", ""}, rows, "keys");
}

std::string profile_section(const train::ProfileSummary& profile) {
  std::vector<std::vector<std::string>> rows;
  for (const train::OperatorTime& op : profile.top) {
    rows.push_back({op.name, std::to_string(op.calls), fmt::format("{:.3f}", op.self_ms),
                    profile.self_ms > 0 ? fmt::format("{:.1f}%", 100 * op.self_ms / profile.self_ms) : "–",
                    fmt::format("{:.3f}", op.total_ms)});
  }
  return fmt::format(
             "<h2>Profile</h2><p>{} optimizer steps recorded by LibTorch's profiler (train.profile); the trace is "
             "<code>{}</code> (open it in ui.perfetto.dev or chrome://tracing). The operators that took the most "
             "time themselves, the operators they called left out:</p>",
             profile.steps, html_escape(profile.trace.filename().string())) +
         table({"operator", "calls", "self ms", "self %", "total ms"}, rows, "numbers");
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

}  // namespace gputrain::report::detail
