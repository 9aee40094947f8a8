// The trainer's state pieces, each through a checkpoint's TrainingState and
// back, and the best-score rule that decides best.ckpt.
#include "run_state.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

namespace gputrain::train::detail {
namespace {

step::EvalResult scored(double accuracy) {
  step::EvalResult r;
  r.classification = true;
  r.samples = 100;
  r.correct = static_cast<int64_t>(std::lround(100 * accuracy));
  r.loss_sum = 10;
  return r;
}

TEST(RunState, OnlyAHigherScoreImprovesTheBestAndNaNNever) {
  EvaluationRecord evals;
  EXPECT_TRUE(evals.improves_best(scored(0.5), true)) << "the first score is the best so far";
  EXPECT_FALSE(evals.improves_best(scored(0.5), true)) << "an equal score is no improvement";
  EXPECT_TRUE(evals.improves_best(scored(0.6), true));
  EXPECT_DOUBLE_EQ(*evals.best_score, 0.6);
  step::EvalResult regression;
  regression.samples = 4;
  regression.loss_sum = std::nan("");
  EXPECT_FALSE(evals.improves_best(regression, false));
  EXPECT_DOUBLE_EQ(*evals.best_score, 0.6);
}

TEST(RunState, EachPieceRestoresWhatItSaved) {
  parallel::StrategyPlan single;
  single.replicas = {torch::Device(torch::kCPU)};
  const auto strategy = parallel::make_strategy(single, {});
  torch::nn::Linear model(2, 3);

  RunPosition position;
  position.step = 37;
  position.epochs_done = 2;
  position.batch = 5;
  TrainingSums sums;
  sums.add({torch::tensor(6.0), torch::tensor(3.0), 4});
  sums.start_epoch();
  sums.add({torch::tensor(2.0), torch::tensor(1.0), 2});
  sums.add({torch::tensor(8.0), torch::tensor(2.0), 3});
  sums.skip(1, 3);
  EvaluationRecord evals;
  ASSERT_TRUE(evals.improves_best(scored(0.75), true));
  evals.stop_rules.restore(0.75, 2);
  evals.evaluated_at = 30;
  evals.best_weights = {torch::ones({3, 2}), torch::zeros({3})};

  checkpoint::TrainingState state;
  position.save(state);
  sums.save(state, *strategy);
  evals.save(state);

  RunPosition position_back;
  position_back.restore(state, "run/step_37.ckpt");
  EXPECT_EQ(position_back.step, 37);
  EXPECT_EQ(position_back.epochs_done, 2);
  EXPECT_EQ(position_back.batch, 5);
  ASSERT_TRUE(position_back.resumed_from.has_value());
  EXPECT_EQ(position_back.resumed_path, "run/step_37.ckpt");

  TrainingSums sums_back;
  sums_back.restore(state, *strategy);
  EXPECT_EQ(sums_back.epoch.samples, 2) << "5 samples, less the 3 of the skipped step";
  EXPECT_EQ(sums_back.interval.samples, 2);
  EXPECT_EQ(sums_back.nan_skipped, 1);
  EXPECT_DOUBLE_EQ(sums_back.epoch.collect(true, *strategy).loss_sum, 10.0);

  EvaluationRecord evals_back;
  evals_back.restore(state, *model, "run/step_37.ckpt");
  EXPECT_DOUBLE_EQ(*evals_back.best_score, 0.75);
  ASSERT_TRUE(evals_back.stop_rules.best().has_value());
  EXPECT_DOUBLE_EQ(*evals_back.stop_rules.best(), 0.75);
  EXPECT_EQ(evals_back.stop_rules.evals_since_best(), 2);
  EXPECT_EQ(evals_back.evaluated_at, 30);
  ASSERT_EQ(evals_back.best_weights.size(), 2u);
  EXPECT_TRUE(torch::equal(evals_back.best_weights[0], torch::ones({3, 2})));
}

}  // namespace
}  // namespace gputrain::train::detail
