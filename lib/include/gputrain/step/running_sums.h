#pragma once
// Loss and correct-prediction sums that stay on the device between log
// intervals, so the loop never waits on the GPU for a number it won't print.
#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::step {

// Up to this many classes an evaluation keeps the whole confusion matrix
// (CIFAR-100's: 10,000 cells); past it, each class's counts and the commonest
// mistakes, since the matrix grows as the classes squared (5,000 classes: 25 M
// cells in every test record of metrics.jsonl, the report and memory).
inline constexpr int64_t kDenseConfusionClasses = 100;
// The mistakes kept past kDenseConfusionClasses classes.
inline constexpr std::size_t kTopConfusions = 20;

// How often the test split's samples of class `truth` were predicted as `predicted`.
struct Confusion {
  int64_t truth = 0;
  int64_t predicted = 0;
  int64_t count = 0;
};

// What an evaluation of `classes` classes records by class, for `gputrain plan`.
std::string class_record_form(int64_t classes);

// What one pass over a split measured.
struct EvalResult {
  double loss_sum = 0;  // summed per-sample losses
  int64_t correct = 0;  // classification only
  int64_t samples = 0;
  bool classification = true;
  // Classification on the test split, by true class: its samples, and those predicted right.
  std::vector<int64_t> class_samples, class_correct;
  // Up to kDenseConfusionClasses classes: counts by true class (row) and
  // predicted class (column), classes x classes, row-major; empty otherwise.
  std::vector<int64_t> confusion;
  // Past kDenseConfusionClasses classes: the kTopConfusions commonest
  // mistakes, most first (ties by true class, then predicted class).
  std::vector<Confusion> top_confusions;
  std::vector<std::string> class_names;  // index -> name where the data set has names (DatasetInfo)

  double mean_loss() const { return samples > 0 ? loss_sum / static_cast<double>(samples) : 0.0; }
  double accuracy() const { return samples > 0 ? static_cast<double>(correct) / static_cast<double>(samples) : 0.0; }
};

// The test split's predictions by true and predicted class, counted on the
// device without a sync: each batch's (true, predicted) pairs are kept, so the
// memory grows with the samples, never with the classes squared.
class ClassCounts {
 public:
  explicit ClassCounts(int64_t classes) : classes_(classes) {}
  void add(const torch::Tensor& targets, const torch::Tensor& predicted);
  // Syncs with the device; under ddp, counts every rank's pairs. Fills
  // `result`'s correct count and class fields, in the form the classes take.
  void collect(EvalResult& result, parallel::Strategy& strategy) const;

 private:
  int64_t classes_;
  std::vector<torch::Tensor> pairs_;  // true * classes + predicted, a tensor per batch
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
