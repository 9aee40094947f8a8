#pragma once
// Loss and correct-prediction sums that stay on the device between log
// intervals, so the loop never waits on the GPU for a number it won't print.
#include <torch/types.h>

#include <cstdint>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/evaluation.h"

namespace gputrain::train::detail {

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

}  // namespace gputrain::train::detail
