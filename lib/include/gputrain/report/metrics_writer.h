#pragma once
// metrics.jsonl: one JSON object per line, every train.log_every steps
// ("split": "train") and every epoch ("train" and "test").
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "gputrain/train/observer.h"

namespace gputrain::report {

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
