#pragma once
// When an evaluation ends training before train.epochs: train.target_accuracy
// reached, or train.early_stopping's patience used up.
#include <cstdint>
#include <optional>

#include "gputrain/plan/evaluation_plan.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::train {

using plan::StopRulesOptions;

struct StopVerdict {
  bool target_reached = false;
  bool improved = false;  // the early-stopping metric beat its best by more than min_delta (always, the first time)
  bool patience_used_up = false;
  bool stop() const { return target_reached || patience_used_up; }
};

// Judges each evaluation in turn. An improvement is as in PyTorch Lightning's
// EarlyStopping: a score better than the best so far by more than min_delta;
// the best only moves on such an improvement, and patience_used_up comes
// with the patience-th evaluation in a row without one.
class StopRules {
 public:
  explicit StopRules(StopRulesOptions options) : options_(options) {}

  StopVerdict judge(const step::EvalResult& test);

  // What a checkpoint keeps, so that a resumed run counts on.
  std::optional<double> best() const { return best_; }  // as a score: accuracy, or -loss
  int64_t evals_since_best() const { return evals_since_best_; }
  bool by_accuracy() const { return options_.by_accuracy; }
  void restore(std::optional<double> best, int64_t evals_since_best) {
    best_ = best;
    evals_since_best_ = evals_since_best;
  }

 private:
  StopRulesOptions options_;
  std::optional<double> best_;
  int64_t evals_since_best_ = 0;
};

}  // namespace gputrain::train
