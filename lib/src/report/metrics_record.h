#pragma once
// One line of metrics.jsonl. Its fields are declared once, in visit() below,
// which JSON writing and reading and TensorBoard's scalars all walk: a new
// figure is a member, a line here, and where metrics_record.cpp fills it in.
// Each line says its kind: "interval" (a log interval of training), "epoch"
// (an epoch's training) or "test" (the epoch's test pass).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/choices.h"
#include "gputrain/train/observer.h"
#include "record_fields.h"

namespace gputrain::report::detail {

using Figure = std::optional<double>;  // unset: not recorded (or NaN, which JSON writes as null)
using Count = std::optional<int64_t>;
inline Figure as_figure(Count n) { return n ? Figure(static_cast<double>(*n)) : std::nullopt; }

enum class RecordKind { kInterval, kEpoch, kTest };
inline constexpr config::ChoiceTable<RecordKind, 3> kRecordKinds{
    {{{"interval", RecordKind::kInterval}, {"epoch", RecordKind::kEpoch}, {"test", RecordKind::kTest}}}};
constexpr const auto& choices(RecordKind) { return kRecordKinds; }

// The kind a line says it is. Lines written before records had a kind are
// told apart as they always were: the test record by its split, the epoch's
// training record by its epoch_s. Unset for a kind this version does not know.
std::optional<RecordKind> record_kind(const nlohmann::json& j);

struct GpuRecord {
  int64_t index = 0;
  Count samples;  // NVML readings behind the figures
  Figure util_mean, util_max, power_w, temperature_c;
  Count memory_used;  // bytes, every process on the device
};

struct MetricsRecord {
  RecordKind kind = RecordKind::kInterval;
  int64_t epoch = 0;  // 1-based
  Count step;         // optimizer steps since the run began
  Figure loss, accuracy, samples_per_s, lr, elapsed_s;
  Figure loss_scale;                                     // interval, epoch
  Count skipped_steps;                                   // interval, epoch
  std::optional<train::RankTiming> ranks;                // interval, ddp
  Figure epoch_s, loader_wait_s;                         // epoch
  Figure gpu_busy;                                       // epoch, on CUDA: share of epoch_s (CUDA events)
  Figure tflops, peak_share;                             // epoch: achieved arithmetic, its share of the peak
  Count samples;                                         // epoch, test
  Count memory_allocated, memory_reserved, memory_peak;  // epoch, on CUDA
  std::vector<GpuRecord> gpus;                           // epoch, when monitored
  Count correct;                                         // test, classification
  std::vector<Figure> per_class_accuracy;                // test, classification
  // The test split by true class (rows) and predicted class (columns), up to
  // step::kDenseConfusionClasses classes; past them, the commonest confusions.
  std::vector<std::vector<int64_t>> confusion;
  std::vector<step::Confusion> top_confusions;
};

template <class V, class R, If<R, step::Confusion> = 0>
void visit(V& v, R& c) {
  v.field("true", c.truth);
  v.field("predicted", c.predicted);
  v.field("count", c.count);
}

template <class V, class R, If<R, GpuRecord> = 0>
void visit(V& v, R& g) {
  v.field("index", g.index);
  v.field("util_mean", g.util_mean, Scalar{"util_mean"});
  v.field("util_max", g.util_max, Scalar{"util_max"});
  v.field("memory_used", g.memory_used, Scalar{"memory_used_gib", kOnEvery, Scalar::When::kAlways, 1 / kGiB});
  v.field("samples", g.samples);
  v.field("power_w", g.power_w, Scalar{"power_w"});
  v.field("temperature_c", g.temperature_c, Scalar{"temperature_c"});
}

// Every field but the kind, in the order a line holds them.
template <class V, class R, If<R, MetricsRecord> = 0>
void visit(V& v, R& r) {
  using When = Scalar::When;
  v.field("epoch", r.epoch);
  v.field("step", r.step);
  v.field("loss", r.loss, Scalar{"loss", kOnEvery, When::kLabeled});
  v.field("accuracy", r.accuracy, Scalar{"accuracy"});
  v.field("samples_per_s", r.samples_per_s, Scalar{"samples_per_s", kOnTraining});
  v.field("lr", r.lr, Scalar{"lr", kOnTraining});
  v.field("elapsed_s", r.elapsed_s);
  v.field("epoch_s", r.epoch_s, Scalar{"epoch_s", kOnEpoch});
  v.field("correct", r.correct);
  v.field("samples", r.samples);
  v.field("loss_scale", r.loss_scale, Scalar{"loss_scale", kOnTraining, When::kFp16});
  v.field("skipped_steps", r.skipped_steps);
  v.field("ranks", r.ranks);
  v.field("loader_wait_s", r.loader_wait_s, Scalar{"loader_wait_s", kOnEpoch});
  v.field("gpu_busy", r.gpu_busy, Scalar{"gpu_busy", kOnEpoch});
  v.field("tflops", r.tflops, Scalar{"tflops", kOnEpoch});
  v.field("peak_share", r.peak_share, Scalar{"peak_share", kOnEpoch});
  v.field("memory_allocated", r.memory_allocated,
          Scalar{"gpu/memory_allocated_gib", kOnEpoch, When::kAlways, 1 / kGiB});
  v.field("memory_reserved", r.memory_reserved, Scalar{"gpu/memory_reserved_gib", kOnEpoch, When::kAlways, 1 / kGiB});
  v.field("memory_peak", r.memory_peak, Scalar{"gpu/memory_peak_gib", kOnEpoch, When::kAlways, 1 / kGiB});
  v.field("gpus", r.gpus);
  v.field("per_class_accuracy", r.per_class_accuracy);
  v.field("confusion", r.confusion);
  v.field("top_confusions", r.top_confusions);
}

// The lines a log interval and an epoch (its training, then its test pass) make.
MetricsRecord interval_record(const train::StepMetrics& m);
std::vector<MetricsRecord> epoch_records(const train::EpochMetrics& m);

void to_json(nlohmann::ordered_json& j, const MetricsRecord& r);
// Throws std::invalid_argument for a kind this version does not know.
void from_json(const nlohmann::json& j, MetricsRecord& r);

}  // namespace gputrain::report::detail
