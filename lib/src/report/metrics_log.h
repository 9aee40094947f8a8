#pragma once
// metrics.jsonl read back for the HTML report, tolerant of how runs end: a
// last line cut short, an epoch without its test record, lines that are not
// JSON. What it cannot use it leaves out and says so in `notes`.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "metrics_record.h"

namespace gputrain::report::detail {

struct StepRecord {
  int64_t epoch = 0;
  double step = 0;
  Figure loss, accuracy, samples_per_s, lr, loss_scale, elapsed_s;
  std::optional<train::RankTiming> ranks;  // ddp
};

struct EpochRecord {
  int64_t epoch = 0;
  Figure step;
  bool has_train = false;
  bool has_test = false;
  Figure train_loss, train_accuracy, test_loss, test_accuracy;
  Figure samples, samples_per_s, epoch_s, elapsed_s, lr, loss_scale, skipped_steps, loader_wait_s;
  Figure memory_allocated, memory_reserved, memory_peak;  // bytes
  std::vector<GpuRecord> gpus;
  // The test split by true class (rows) and predicted class (columns); empty
  // for regression and in files written before it was recorded.
  std::vector<std::vector<int64_t>> confusion;
};

struct MetricsLog {
  std::vector<StepRecord> steps;
  std::map<int64_t, EpochRecord> epochs;
  std::vector<std::string> notes;
};

// Throws UserError when the file cannot be opened.
MetricsLog read_metrics_log(const std::filesystem::path& path);

}  // namespace gputrain::report::detail
