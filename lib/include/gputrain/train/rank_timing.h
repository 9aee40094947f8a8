#pragma once
// Per-rank timing under ddp: at each log interval every rank's step time,
// data wait and collective wait, gathered to all ranks (one small
// collective), and the straggler rule. Ranks step in lockstep, so a slow rank
// does not show in step times, which are all alike: it shows as the others'
// collective wait, while its own work (step time less collective wait) is the
// longest.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/parallel/strategy.h"
#include "gputrain/train/observer.h"

namespace gputrain::train {

// One rank's seconds per optimizer step over a log interval.
struct RankFigures {
  double step_s = 0;
  double data_wait_s = 0;
  double collective_wait_s = 0;
  double work_s() const { return step_s - collective_wait_s; }
};

// The spread of each figure over the ranks, and the rank with the most work.
RankTiming summarize(const std::vector<RankFigures>& ranks);

// A straggler: one rank whose work per step exceeds the mean of the others'
// by more than kMargin (and by kFloorS, below which timer noise rules) in
// kIntervals log intervals in a row. Warned about once per run.
class StragglerWatch {
 public:
  static constexpr double kMargin = 0.2;
  static constexpr double kFloorS = 2e-4;
  static constexpr int kIntervals = 3;

  explicit StragglerWatch(std::vector<std::string> hosts) : hosts_(std::move(hosts)) {}
  // The warning, the first time a straggler is found; nullopt otherwise.
  std::optional<std::string> observe(const std::vector<RankFigures>& ranks);

 private:
  std::vector<std::string> hosts_;
  int64_t suspect_ = -1;
  int in_a_row_ = 0;
  double suspect_work_s_ = 0;  // summed over the intervals in a row
  double others_work_s_ = 0;
  bool warned_ = false;
};

// What the training loop keeps per log interval: this rank's figures since
// the interval began, gathered from every rank when it ends.
class RankTimer {
 public:
  explicit RankTimer(parallel::Strategy& strategy);
  // At the start of an epoch and after each log interval.
  void start_interval(int64_t step, double loader_wait_s);
  // Every rank calls it at the same step. nullopt in a single process; the
  // primary rank logs a straggler warning.
  std::optional<RankTiming> end_interval(int64_t step, double interval_s, double loader_wait_s);

 private:
  parallel::Strategy& strategy_;
  StragglerWatch watch_;
  int64_t start_step_ = 0;
  double start_loader_wait_s_ = 0;
  double start_collective_wait_s_ = 0;
};

}  // namespace gputrain::train
