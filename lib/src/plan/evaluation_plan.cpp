#include "gputrain/plan/evaluation_plan.h"

namespace gputrain::plan {

EvaluationPlan plan_evaluation(const config::TrainConfig& train, bool classification) {
  EvaluationPlan plan;
  plan.every_epochs = train.eval_every;
  plan.every_steps = train.eval_every_steps;
  plan.tta = train.tta;
  plan.ema = train.ema;
  const config::EarlyStoppingConfig& early = train.early_stopping;
  plan.stop.target_accuracy = train.target_accuracy;
  plan.stop.patience = early.patience;
  plan.stop.min_delta = early.min_delta;
  plan.stop.by_accuracy =
      early.metric == config::StopMetric::kAccuracy || (early.metric == config::StopMetric::kAuto && classification);
  plan.restore_best = early.restore_best;
  return plan;
}

}  // namespace gputrain::plan
