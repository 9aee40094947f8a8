#include "metrics_record.h"

#include <fmt/format.h>

#include <cstddef>
#include <stdexcept>

namespace gputrain::report::detail {

namespace {

// A square matrix, or nothing: a confusion matrix cut short says nothing whole.
bool square(const std::vector<std::vector<int64_t>>& rows) {
  for (const auto& row : rows) {
    if (row.size() != rows.size()) return false;
  }
  return true;
}

}  // namespace

std::optional<RecordKind> record_kind(const nlohmann::json& j) {
  const auto it = j.find("kind");
  if (it != j.end() && it->is_string()) return kRecordKinds.parse(it->get<std::string>());
  if (j.value("split", "") == "test") return RecordKind::kTest;
  return j.contains("epoch_s") ? RecordKind::kEpoch : RecordKind::kInterval;
}

void to_json(nlohmann::ordered_json& j, const MetricsRecord& r) {
  JsonOut out;
  out.field("kind", r.kind);
  out.field("split", std::string(r.kind == RecordKind::kTest ? "test" : "train"));  // what lines before `kind` said
  visit(out, r);
  j = std::move(out.json());
}

void from_json(const nlohmann::json& j, MetricsRecord& r) {
  const std::optional<RecordKind> kind = record_kind(j);
  if (!kind) throw std::invalid_argument(fmt::format("a record of an unknown kind ({})", j["kind"].dump()));
  r = MetricsRecord{};
  r.kind = *kind;
  JsonIn in(j);
  visit(in, r);
  if (!square(r.confusion)) r.confusion.clear();
}

MetricsRecord interval_record(const train::StepMetrics& m) {
  MetricsRecord r;
  r.kind = RecordKind::kInterval;
  r.epoch = m.epoch;
  r.step = m.step;
  r.loss = m.loss;
  r.accuracy = m.accuracy;  // regression has none
  r.samples_per_s = m.samples_per_s;
  r.lr = m.lr;
  r.elapsed_s = m.elapsed_s;
  r.loss_scale = m.loss_scale;
  r.skipped_steps = m.skipped_steps;
  r.ranks = m.ranks;
  return r;
}

std::vector<MetricsRecord> epoch_records(const train::EpochMetrics& m) {
  MetricsRecord train;
  train.kind = RecordKind::kEpoch;
  train.epoch = m.epoch;
  train.step = m.step;
  train.loss = m.train.mean_loss();
  if (m.train.classification) train.accuracy = m.train.accuracy();
  train.samples_per_s = m.samples_per_s;
  train.lr = m.lr;
  train.elapsed_s = m.elapsed_s;
  train.epoch_s = m.epoch_s;
  train.samples = m.train.samples;
  train.loss_scale = m.loss_scale;
  train.skipped_steps = m.skipped_steps;
  train.loader_wait_s = m.loader_wait_s;
  train.gpu_busy = m.gpu_busy;
  train.tflops = m.tflops;
  train.peak_share = m.peak_share;
  if (m.cuda) {
    train.memory_allocated = m.memory_allocated;
    train.memory_reserved = m.memory_reserved;
    train.memory_peak = m.memory_peak;
  }
  for (const auto& g : m.gpus) {
    train.gpus.push_back(
        {g.index, g.samples, g.util_mean, g.util_max, g.power_mean_w, g.temperature_max_c, g.memory_used_max});
  }
  if (!m.has_test) return {train};
  MetricsRecord test;
  test.kind = RecordKind::kTest;
  test.epoch = m.epoch;
  test.step = m.step;
  test.loss = m.test.mean_loss();
  if (m.test.classification) {
    test.accuracy = m.test.accuracy();
    test.correct = m.test.correct;
  }
  test.samples_per_s = m.samples_per_s;
  test.lr = m.lr;
  test.elapsed_s = m.elapsed_s;
  test.samples = m.test.samples;
  const std::size_t classes = m.test.class_samples.size();
  for (std::size_t c = 0; c < classes; ++c) {
    const int64_t total = m.test.class_samples[c];
    test.per_class_accuracy.push_back(
        total > 0 ? Figure(static_cast<double>(m.test.class_correct[c]) / static_cast<double>(total)) : std::nullopt);
  }
  // Rows are the true classes, columns the predicted ones.
  for (std::size_t c = 0; c < classes && !m.test.confusion.empty(); ++c) {
    const auto first = m.test.confusion.begin() + static_cast<std::ptrdiff_t>(c * classes);
    test.confusion.emplace_back(first, first + static_cast<std::ptrdiff_t>(classes));
  }
  test.top_confusions = m.test.top_confusions;
  return {train, test};
}

}  // namespace gputrain::report::detail
