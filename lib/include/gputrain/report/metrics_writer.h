#pragma once
// metrics.jsonl: one JSON object per line, each saying its "kind": every
// train.log_every steps an "interval" record, every epoch an "epoch" record
// (its training) and a "test" record. The epoch record also carries "epoch_s",
// "loader_wait_s", on CUDA "gpu_busy" (CUDA events) and the allocator's "memory_*"
// and, when NVML was sampled,
// "gpus": [{index, util_mean, util_max, memory_used, samples, power_w,
// temperature_c}]. The keys are named once, in src/report/metrics_record.h.
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "gputrain/train/observer.h"

namespace gputrain::report {

namespace detail {
struct MetricsRecord;
}  // namespace detail

// Before a resumed run appends: drops the records an interrupted run wrote
// after its checkpoint (at optimizer step `step`; `before_test_pass`: the
// checkpoint precedes that step's epoch records), and a half-written last
// line, so that the file reads as if the run had never stopped.
void rewind_metrics(const std::filesystem::path& path, int64_t step, bool before_test_pass);

class MetricsWriter : public train::TrainObserver {
 public:
  explicit MetricsWriter(const std::filesystem::path& path);
  void on_step(const train::StepMetrics& m) override;
  void on_epoch(const train::EpochMetrics& m) override;

 private:
  void write(const detail::MetricsRecord& record);
  void write(const std::string& line);
  std::filesystem::path path_;
  std::ofstream out_;
  std::uintmax_t whole_bytes_ = 0;  // the file's size up to its last whole line
};

}  // namespace gputrain::report
