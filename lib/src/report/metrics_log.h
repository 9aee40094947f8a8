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

// An epoch's two lines: its training record, then its test pass's (absent
// for unlabeled data, and for a run stopped before either was written).
struct EpochRecord {
  int64_t epoch = 0;
  std::optional<MetricsRecord> train;
  std::optional<MetricsRecord> test;
  // The optimizer step at the epoch's end, which either line records.
  Figure step() const;
};

struct MetricsLog {
  std::vector<MetricsRecord> steps;  // the log intervals
  std::map<int64_t, EpochRecord> epochs;
  std::vector<std::string> notes;
};

// Throws UserError when the file cannot be opened.
MetricsLog read_metrics_log(const std::filesystem::path& path);

}  // namespace gputrain::report::detail
