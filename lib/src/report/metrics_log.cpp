#include "metrics_log.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::report::detail {

namespace {

using Json = nlohmann::json;

Figure figure(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::vector<GpuRecord> gpu_records(const Json& j) {
  std::vector<GpuRecord> out;
  const auto it = j.find("gpus");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& g : *it) {
    if (!g.is_object()) continue;
    GpuRecord r;
    r.index = static_cast<int64_t>(figure(g, "index").value_or(0));
    r.util_mean = figure(g, "util_mean");
    r.util_max = figure(g, "util_max");
    r.memory_used = figure(g, "memory_used");
    r.power_w = figure(g, "power_w");
    r.temperature_c = figure(g, "temperature_c");
    out.push_back(r);
  }
  return out;
}

// A square matrix of counts, or nothing when the record has none that is whole.
std::vector<std::vector<int64_t>> confusion_rows(const Json& j) {
  std::vector<std::vector<int64_t>> rows;
  if (!j.contains("confusion") || !j["confusion"].is_array()) return rows;
  const std::size_t classes = j["confusion"].size();
  for (const auto& r : j["confusion"]) {
    if (!r.is_array() || r.size() != classes) return {};
    std::vector<int64_t> row;
    for (const auto& n : r) {
      if (!n.is_number_integer()) return {};
      row.push_back(n.get<int64_t>());
    }
    rows.push_back(row);
  }
  return rows;
}

void add_record(MetricsLog& log, const Json& j) {
  const int64_t epoch = static_cast<int64_t>(figure(j, "epoch").value_or(0));
  const std::string split = j.contains("split") && j["split"].is_string() ? j["split"].get<std::string>() : "";
  if (split == "test") {
    EpochRecord& e = log.epochs[epoch];
    e.epoch = epoch;
    e.has_test = true;
    e.step = figure(j, "step");
    e.test_loss = figure(j, "loss");
    e.test_accuracy = figure(j, "accuracy");
    e.confusion = confusion_rows(j);
    return;
  }
  if (j.contains("epoch_s")) {  // only the epoch's train record has it
    EpochRecord& e = log.epochs[epoch];
    e.epoch = epoch;
    e.has_train = true;
    e.step = figure(j, "step");
    e.train_loss = figure(j, "loss");
    e.train_accuracy = figure(j, "accuracy");
    e.samples = figure(j, "samples");
    e.samples_per_s = figure(j, "samples_per_s");
    e.epoch_s = figure(j, "epoch_s");
    e.elapsed_s = figure(j, "elapsed_s");
    e.lr = figure(j, "lr");
    e.loss_scale = figure(j, "loss_scale");
    e.skipped_steps = figure(j, "skipped_steps");
    e.loader_wait_s = figure(j, "loader_wait_s");
    e.memory_allocated = figure(j, "memory_allocated");
    e.memory_reserved = figure(j, "memory_reserved");
    e.memory_peak = figure(j, "memory_peak");
    e.gpus = gpu_records(j);
    return;
  }
  StepRecord s;
  s.epoch = epoch;
  s.step = figure(j, "step").value_or(0);
  s.loss = figure(j, "loss");
  s.accuracy = figure(j, "accuracy");
  s.samples_per_s = figure(j, "samples_per_s");
  s.lr = figure(j, "lr");
  s.loss_scale = figure(j, "loss_scale");
  s.elapsed_s = figure(j, "elapsed_s");
  log.steps.push_back(s);
}

}  // namespace

MetricsLog read_metrics_log(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read the metrics", path.string()));
  MetricsLog log;
  std::vector<int64_t> bad_lines;
  int64_t line_number = 0;
  int64_t last_line = 0;  // the last line with text
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (trim(line).empty()) continue;
    last_line = line_number;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      bad_lines.push_back(line_number);
      continue;
    }
    add_record(log, j);
  }
  for (const int64_t n : bad_lines) {
    log.notes.push_back(
        n == last_line ? fmt::format("The last line of metrics.jsonl (line {}) is cut short: the run stopped while "
                                     "writing it. It is left out.",
                                     n)
                       : fmt::format("Line {} of metrics.jsonl is not a JSON object. It is left out.", n));
  }
  return log;
}

}  // namespace gputrain::report::detail
