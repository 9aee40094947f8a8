#pragma once
// One line of metrics.jsonl, written and read through the one to_json /
// from_json pair below, so that the file's keys are named in one place.
// Each line says its kind: "interval" (a log interval of training), "epoch"
// (an epoch's training) or "test" (the epoch's test pass).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/train/observer.h"

namespace gputrain::report::detail {

using Figure = std::optional<double>;  // unset: not recorded (or NaN, which JSON writes as null)
using Count = std::optional<int64_t>;

enum class RecordKind { kInterval, kEpoch, kTest };

const char* word(RecordKind kind);

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
  Count samples;                                         // epoch, test
  Count memory_allocated, memory_reserved, memory_peak;  // epoch, on CUDA
  std::vector<GpuRecord> gpus;                           // epoch, when monitored
  Count correct;                                         // test, classification
  std::vector<Figure> per_class_accuracy;                // test, classification
  // The test split by true class (rows) and predicted class (columns).
  std::vector<std::vector<int64_t>> confusion;
};

void to_json(nlohmann::ordered_json& j, const MetricsRecord& r);
// Throws std::invalid_argument for a kind this version does not know.
void from_json(const nlohmann::json& j, MetricsRecord& r);

}  // namespace gputrain::report::detail
