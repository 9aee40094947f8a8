#include "metrics_record.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <utility>

namespace gputrain::report::detail {

namespace {

using Json = nlohmann::json;

constexpr std::array<std::pair<RecordKind, const char*>, 3> kKinds{
    {{RecordKind::kInterval, "interval"}, {RecordKind::kEpoch, "epoch"}, {RecordKind::kTest, "test"}}};

Figure figure(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Count count(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

template <class T>
void put(nlohmann::ordered_json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
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

std::vector<GpuRecord> gpu_records(const Json& j) {
  std::vector<GpuRecord> out;
  const auto it = j.find("gpus");
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& g : *it) {
    if (!g.is_object()) continue;
    GpuRecord r;
    r.index = count(g, "index").value_or(0);
    r.samples = count(g, "samples");
    r.util_mean = figure(g, "util_mean");
    r.util_max = figure(g, "util_max");
    r.memory_used = count(g, "memory_used");
    r.power_w = figure(g, "power_w");
    r.temperature_c = figure(g, "temperature_c");
    out.push_back(r);
  }
  return out;
}

nlohmann::ordered_json spread_json(const train::Spread& s) {
  return {{"min", s.min}, {"mean", s.mean}, {"max", s.max}};
}

std::optional<train::Spread> spread(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const Figure min = figure(*it, "min"), mean = figure(*it, "mean"), max = figure(*it, "max");
  if (!min || !mean || !max) return std::nullopt;
  return train::Spread{*min, *mean, *max};
}

// The per-rank timing of an interval, or nothing when any part is missing.
std::optional<train::RankTiming> rank_timing(const Json& j) {
  const auto it = j.find("ranks");
  if (it == j.end() || !it->is_object()) return std::nullopt;
  const Count ranks = count(*it, "count"), slowest = count(*it, "slowest");
  const auto step = spread(*it, "step_s"), data = spread(*it, "data_wait_s"),
             collective = spread(*it, "collective_wait_s");
  if (!ranks || !slowest || !step || !data || !collective) return std::nullopt;
  return train::RankTiming{*ranks, *step, *data, *collective, *slowest};
}

}  // namespace

const char* word(RecordKind kind) {
  for (const auto& [k, w] : kKinds) {
    if (k == kind) return w;
  }
  return "?";
}

std::optional<RecordKind> record_kind(const Json& j) {
  const auto it = j.find("kind");
  if (it != j.end() && it->is_string()) {
    for (const auto& [kind, w] : kKinds) {
      if (*it == w) return kind;
    }
    return std::nullopt;
  }
  if (j.value("split", "") == "test") return RecordKind::kTest;
  return j.contains("epoch_s") ? RecordKind::kEpoch : RecordKind::kInterval;
}

void to_json(nlohmann::ordered_json& j, const MetricsRecord& r) {
  j = nlohmann::ordered_json{{"kind", word(r.kind)}, {"epoch", r.epoch}};
  put(j, "step", r.step);
  j["split"] = r.kind == RecordKind::kTest ? "test" : "train";
  put(j, "loss", r.loss);
  put(j, "accuracy", r.accuracy);
  put(j, "samples_per_s", r.samples_per_s);
  put(j, "lr", r.lr);
  put(j, "elapsed_s", r.elapsed_s);
  put(j, "epoch_s", r.epoch_s);
  if (r.kind == RecordKind::kTest) put(j, "correct", r.correct);
  put(j, "samples", r.samples);
  put(j, "loss_scale", r.loss_scale);
  put(j, "skipped_steps", r.skipped_steps);
  if (r.ranks) {
    j["ranks"] = nlohmann::ordered_json{{"count", r.ranks->ranks},
                                        {"slowest", r.ranks->slowest},
                                        {"step_s", spread_json(r.ranks->step_s)},
                                        {"data_wait_s", spread_json(r.ranks->data_wait_s)},
                                        {"collective_wait_s", spread_json(r.ranks->collective_wait_s)}};
  }
  put(j, "loader_wait_s", r.loader_wait_s);
  put(j, "gpu_busy", r.gpu_busy);
  put(j, "memory_allocated", r.memory_allocated);
  put(j, "memory_reserved", r.memory_reserved);
  put(j, "memory_peak", r.memory_peak);
  if (!r.gpus.empty()) {
    nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
    for (const auto& g : r.gpus) {
      nlohmann::ordered_json gpu{{"index", g.index}};
      put(gpu, "util_mean", g.util_mean);
      put(gpu, "util_max", g.util_max);
      put(gpu, "memory_used", g.memory_used);
      put(gpu, "samples", g.samples);
      put(gpu, "power_w", g.power_w);
      put(gpu, "temperature_c", g.temperature_c);
      gpus.push_back(gpu);
    }
    j["gpus"] = gpus;
  }
  if (!r.per_class_accuracy.empty()) {
    nlohmann::ordered_json per_class = nlohmann::ordered_json::array();
    for (const Figure& a : r.per_class_accuracy) per_class.push_back(a ? nlohmann::ordered_json(*a) : nullptr);
    j["per_class_accuracy"] = per_class;
  }
  if (!r.confusion.empty()) j["confusion"] = r.confusion;
}

void from_json(const Json& j, MetricsRecord& r) {
  const std::optional<RecordKind> kind = record_kind(j);
  if (!kind) throw std::invalid_argument(fmt::format("a record of an unknown kind ({})", j["kind"].dump()));
  r = MetricsRecord{};
  r.kind = *kind;
  r.epoch = count(j, "epoch").value_or(0);
  r.step = count(j, "step");
  r.loss = figure(j, "loss");
  r.accuracy = figure(j, "accuracy");
  r.samples_per_s = figure(j, "samples_per_s");
  r.lr = figure(j, "lr");
  r.elapsed_s = figure(j, "elapsed_s");
  r.epoch_s = figure(j, "epoch_s");
  r.correct = count(j, "correct");
  r.samples = count(j, "samples");
  r.loss_scale = figure(j, "loss_scale");
  r.skipped_steps = count(j, "skipped_steps");
  r.ranks = rank_timing(j);
  r.loader_wait_s = figure(j, "loader_wait_s");
  r.gpu_busy = figure(j, "gpu_busy");
  r.memory_allocated = count(j, "memory_allocated");
  r.memory_reserved = count(j, "memory_reserved");
  r.memory_peak = count(j, "memory_peak");
  r.gpus = gpu_records(j);
  if (const auto it = j.find("per_class_accuracy"); it != j.end() && it->is_array()) {
    for (const auto& a : *it) r.per_class_accuracy.push_back(a.is_number() ? Figure(a.get<double>()) : std::nullopt);
  }
  r.confusion = confusion_rows(j);
}

}  // namespace gputrain::report::detail
