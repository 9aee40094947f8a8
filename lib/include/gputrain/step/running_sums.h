#pragma once
// Loss and correct-prediction sums that stay on the device between log
// intervals, so the loop never waits on the GPU for a number it won't print.
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::step {

// What one pass over a split measured.
struct EvalResult {
  double loss_sum = 0;  // summed per-sample losses
  int64_t correct = 0;  // classification only
  int64_t samples = 0;
  bool classification = true;
  // Classification on the test split: counts by true class (row) and
  // predicted class (column), classes x classes, row-major; empty otherwise.
  std::vector<int64_t> confusion;
  std::vector<std::string> class_names;  // index -> name where the data set has names (DatasetInfo)

  double mean_loss() const { return samples > 0 ? loss_sum / static_cast<double>(samples) : 0.0; }
  double accuracy() const { return samples > 0 ? static_cast<double>(correct) / static_cast<double>(samples) : 0.0; }
};

struct RunningSums : checkpoint::PartialSums {
  void add(const torch::Tensor& batch_loss_sum, const torch::Tensor& batch_correct, int64_t batch_samples);
  // Syncs with the device; under ddp, sums over every rank.
  EvalResult collect(bool classification, parallel::Strategy& strategy) const;
  // The sums over every rank (under ddp), for a checkpoint; these stay as they are.
  checkpoint::PartialSums summed(parallel::Strategy& strategy) const;
  // Continues from a checkpoint's sums: the primary rank holds them all, so
  // that the next summed() or collect() over ranks counts them once.
  void restore(const checkpoint::PartialSums& stored, parallel::Strategy& strategy);
};

}  // namespace gputrain::step
