#pragma once
// metrics.jsonl: one JSON object per line, every train.log_every steps
// ("split": "train") and every epoch ("train" and "test"). An epoch's train
// record also carries "epoch_s", "loader_wait_s", the CUDA allocator's
// "memory_*" and, when NVML was sampled, "gpus": [{index, util_mean, util_max,
// memory_used, power_w, temperature_c, samples}].
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "gputrain/train/observer.h"

namespace gputrain::report {

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
  void write(const std::string& line);
  std::filesystem::path path_;
  std::ofstream out_;
  std::uintmax_t whole_bytes_ = 0;  // the file's size up to its last whole line
};

}  // namespace gputrain::report
