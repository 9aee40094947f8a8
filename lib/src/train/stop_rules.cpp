#include "gputrain/train/stop_rules.h"

namespace gputrain::train {

StopVerdict StopRules::judge(const step::EvalResult& test) {
  StopVerdict verdict;
  verdict.target_reached = options_.target_accuracy > 0 && test.accuracy() >= options_.target_accuracy;
  const double score = options_.by_accuracy ? test.accuracy() : -test.mean_loss();
  verdict.improved = !best_ || score > *best_ + options_.min_delta;
  if (verdict.improved) {
    best_ = score;
    evals_since_best_ = 0;
  } else {
    ++evals_since_best_;
  }
  verdict.patience_used_up = options_.patience > 0 && evals_since_best_ >= options_.patience;
  return verdict;
}

}  // namespace gputrain::train
