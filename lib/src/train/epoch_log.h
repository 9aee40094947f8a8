#pragma once
// The log's lines at the end of each epoch: the training figures, then the
// seed's test line. The loop reports; this says it in words.
#include <cstdint>

#include "gputrain/train/observer.h"

namespace gputrain::train::detail {

class EpochLog : public TrainObserver {
 public:
  // `fp16`: the run has a gradient scaler, whose scale and skipped steps each line shows.
  EpochLog(int64_t epochs, bool fp16) : epochs_(epochs), fp16_(fp16) {}
  void on_epoch(const EpochMetrics& m) override;

 private:
  int64_t epochs_;
  bool fp16_;
};

}  // namespace gputrain::train::detail
