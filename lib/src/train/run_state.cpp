#include "run_state.h"

#include "gputrain/train/weight_average.h"

namespace gputrain::train::detail {

void RunPosition::save(checkpoint::TrainingState& state) const { state.position = {epochs_done, batch, step}; }

void RunPosition::restore(const checkpoint::TrainingState& state, const std::string& checkpoint_name) {
  const checkpoint::Position& at = state.position;
  step = at.step;
  epochs_done = at.epoch;
  batch = at.batch;
  resumed_from = at;
  resumed_path = checkpoint_name;
}

void TrainingSums::add(const step::MicroBatchSums& sums) {
  epoch.add(sums.loss_sum, sums.correct, sums.samples);
  interval.add(sums.loss_sum, sums.correct, sums.samples);
}

void TrainingSums::start_epoch() {
  epoch = step::RunningSums{};
  interval = step::RunningSums{};
}

void TrainingSums::skip(int64_t steps, int64_t samples) {
  nan_skipped += steps;
  interval.samples -= samples;  // both sums counted every step since the last read
  epoch.samples -= samples;
}

void TrainingSums::save(checkpoint::TrainingState& state, parallel::Strategy& strategy) const {
  state.epoch_sums = epoch.summed(strategy);
  state.interval_sums = interval.summed(strategy);
  state.skipped_steps = nan_skipped;
}

void TrainingSums::restore(const checkpoint::TrainingState& state, parallel::Strategy& strategy) {
  epoch.restore(state.epoch_sums, strategy);
  interval.restore(state.interval_sums, strategy);
  nan_skipped = state.skipped_steps;
}

bool EvaluationRecord::improves_best(const step::EvalResult& test, bool classification) {
  const double score = classification ? test.accuracy() : -test.mean_loss();
  if (best_score && !(score > *best_score)) return false;  // a NaN score improves nothing
  best_score = score;
  return true;
}

void EvaluationRecord::save(checkpoint::TrainingState& state) const {
  state.best_score = best_score;
  state.stop_best = stop_rules.best();
  state.evals_since_best = stop_rules.evals_since_best();
  state.evaluated_step = evaluated_at;
  state.best_weights = best_weights;
}

void EvaluationRecord::restore(const checkpoint::TrainingState& state, torch::nn::Module& model,
                               const std::string& checkpoint_name) {
  best_score = state.best_score;
  stop_rules.restore(state.stop_best, state.evals_since_best);
  evaluated_at = state.evaluated_step;
  if (!state.best_weights.empty()) {
    best_weights = fitting_tensors(state.best_weights, weights_and_buffers(model),
                                   "best weights (train.early_stopping.restore_best)", checkpoint_name);
  }
}

}  // namespace gputrain::train::detail
