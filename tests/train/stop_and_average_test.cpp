// train.target_accuracy, train.eval_every(_steps), train.early_stopping and
// train.ema in whole runs on generated data (CPU): each stops, evaluates and
// ends with the weights it says.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/device/resolve.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/evaluate.h"
#include "gputrain/train/trainer.h"
#include "support/temp_dir.h"
#include "train/recorder.h"
#include "train/synthetic_run.h"

namespace gputrain::train {
namespace {

// 256 samples in batches of 32: 8 steps an epoch, 6 epochs unless `overrides` say otherwise.
config::LoadedConfig synthetic(std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), "train.epochs=6");
  return synthetic_run(overrides);
}

// Trains with checkpoints in `dir`.
TrainSummary fit_with_checkpoints(Trainer& trainer, const testing::TempDir& dir) {
  Recorder events;
  FitOptions options;
  options.checkpoint_dir = dir / "checkpoints";
  return trainer.fit(events, options);
}

void expect_same_tensors(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "tensor " << i;
}

TEST(TargetAccuracy, StopsAtTheFirstEpochThatReachesItAndSaysHowLongItTook) {
  Recorder all;
  Trainer(plan::resolve_run(synthetic(), cpu(), {})).fit(all);
  const double target = all.epochs[2].test.accuracy();
  int64_t first = 1;
  while (all.epochs[first - 1].test.accuracy() < target) ++first;

  Recorder events;
  const TrainSummary summary =
      Trainer(plan::resolve_run(synthetic({fmt::format("train.target_accuracy={:.17g}", target)}), cpu(), {}))
          .fit(events);
  ASSERT_TRUE(summary.target.has_value());
  EXPECT_EQ(summary.target->epoch, first);
  EXPECT_EQ(summary.target->step, first * 8);
  EXPECT_DOUBLE_EQ(summary.target->accuracy, all.epochs[first - 1].test.accuracy());
  EXPECT_EQ(summary.epochs, first);
  EXPECT_EQ(summary.steps, first * 8);
  EXPECT_EQ(events.epochs.size(), static_cast<std::size_t>(first));
  EXPECT_GT(summary.target->train_s, 0);
  EXPECT_LE(summary.target->train_s, summary.target->wall_s);
  EXPECT_NE(summary.ended_early.find("reached train.target_accuracy"), std::string::npos) << summary.ended_early;

  const TrainSummary unreached =
      Trainer(plan::resolve_run(synthetic({"train.epochs=1", "train.target_accuracy=1"}), cpu(), {})).fit(all);
  EXPECT_FALSE(unreached.target.has_value());
  EXPECT_TRUE(unreached.ended_early.empty());
}

TEST(TargetAccuracy, EvaluationsEveryNStepsStopWithinAnEpoch) {
  Recorder events;
  const TrainSummary summary =
      Trainer(plan::resolve_run(synthetic({"train.eval_every_steps=3", "train.target_accuracy=0.01"}), cpu(), {}))
          .fit(events);
  ASSERT_TRUE(summary.target.has_value());
  EXPECT_EQ(summary.target->step, 3);
  EXPECT_EQ(summary.target->epoch, 1);
  EXPECT_EQ(summary.steps, 3);
  ASSERT_EQ(events.epochs.size(), 1u);  // the epoch it ended in, as far as it went
  EXPECT_EQ(events.epochs[0].train.samples, 3 * 32);
  EXPECT_TRUE(events.epochs[0].has_test);
  EXPECT_DOUBLE_EQ(events.epochs[0].test.accuracy(), summary.target->accuracy);
}

TEST(Evaluation, EveryNthEpochAndAlwaysTheLast) {
  Recorder events;
  Trainer(plan::resolve_run(synthetic({"train.epochs=5", "train.eval_every=2"}), cpu(), {})).fit(events);
  ASSERT_EQ(events.epochs.size(), 5u);
  std::vector<bool> tested;
  for (const EpochMetrics& m : events.epochs) tested.push_back(m.has_test);
  EXPECT_EQ(tested, (std::vector<bool>{false, true, false, true, true}));
}

// At lr 1e-30 the weights stay put, so no evaluation after the first improves.
TEST(EarlyStopping, StopsWhenThePatienceRunsOut) {
  for (const std::string metric : {"accuracy", "loss"}) {
    SCOPED_TRACE(metric);
    Recorder events;
    const TrainSummary summary =
        Trainer(
            plan::resolve_run(synthetic({"train.epochs=10", "optim.lr=1e-30", "optim.momentum=0",
                                         "train.early_stopping.patience=2", "train.early_stopping.metric=" + metric}),
                              cpu(), {}))
            .fit(events);
    EXPECT_EQ(summary.epochs, 3);  // epoch 1 sets the best; 2 and 3 do not beat it
    EXPECT_EQ(events.epochs.size(), 3u);
    EXPECT_NE(summary.ended_early.find("early stopping"), std::string::npos) << summary.ended_early;
  }
}

TEST(EarlyStopping, RestoreBestEndsWithTheWeightsOfTheBestEvaluation) {
  testing::TempDir dir;
  const auto loaded = synthetic({"optim.lr=0.5", "train.early_stopping.restore_best=true"});
  Trainer trainer(plan::resolve_run(loaded, cpu(), {}));
  fit_with_checkpoints(trainer, dir);
  // best.ckpt is written on each better test accuracy: the same evaluations restore_best keeps.
  torch::nn::Sequential best = Trainer(plan::resolve_run(loaded, cpu(), {})).model();
  checkpoint::load_weights(best, (dir / "checkpoints" / "best.ckpt").string());
  expect_same_tensors(trainer.model()->parameters(), best->parameters());
}

TEST(WeightAverage, EvaluationsModelAndCheckpointsUseTheAverage) {
  testing::TempDir dir;
  const auto loaded = synthetic({"train.epochs=2", "train.ema.decay=0.9"});
  Trainer trainer(plan::resolve_run(loaded, cpu(), {}));
  const TrainSummary summary = fit_with_checkpoints(trainer, dir);
  const step::EvalResult now = trainer.evaluate();
  EXPECT_EQ(now.correct, summary.last_test.correct) << "the model ends with the average it evaluated";
  EXPECT_NEAR(now.mean_loss(), summary.last_test.mean_loss(), 1e-6);
  const auto last = checkpoint::list_checkpoints(dir / "checkpoints").back();
  const checkpoint::Checkpoint stored = checkpoint::Checkpoint::read(last);
  expect_same_tensors(stored.state().ema, trainer.model()->parameters());
  const step::EvalResult tested = test_saved_weights(loaded, last.string());
  EXPECT_EQ(tested.correct, summary.last_test.correct) << "gputrain test of a checkpoint evaluates its average";

  Recorder plain;
  const TrainSummary without = Trainer(plan::resolve_run(synthetic({"train.epochs=2"}), cpu(), {})).fit(plain);
  EXPECT_NE(without.last_test.loss_sum, summary.last_test.loss_sum);
  EXPECT_EQ(without.last_train.loss_sum, summary.last_train.loss_sum) << "the average never feeds training";
}

// optim.lookahead in a whole run (8 steps an epoch, syncs every 4): each
// epoch ends on a sync, where the weights are the slow ones the checkpoint
// keeps; alpha 1 moves the slow weights all the way, which is plain training.
TEST(Lookahead, SyncsEveryKStepsOfTheRunAndCheckpointsTheSlowWeights) {
  testing::TempDir dir;
  Trainer trainer(plan::resolve_run(synthetic({"train.epochs=2", "optim.lookahead.k=4"}), cpu(), {}));
  const TrainSummary summary = fit_with_checkpoints(trainer, dir);
  const checkpoint::Checkpoint stored =
      checkpoint::Checkpoint::read(checkpoint::list_checkpoints(dir / "checkpoints").back());
  EXPECT_EQ(stored.state().position.step, 16);
  expect_same_tensors(stored.state().lookahead, trainer.model()->parameters());

  Trainer plain(plan::resolve_run(synthetic({"train.epochs=2"}), cpu(), {}));
  Recorder quiet;
  const TrainSummary without = plain.fit(quiet);
  EXPECT_NE(without.last_train.loss_sum, summary.last_train.loss_sum) << "the syncs changed the weights trained on";
  Trainer all_the_way(
      plan::resolve_run(synthetic({"train.epochs=2", "optim.lookahead.k=4", "optim.lookahead.alpha=1"}), cpu(), {}));
  all_the_way.fit(quiet);
  expect_same_tensors(all_the_way.model()->parameters(), plain.model()->parameters());
}

TEST(EvaluationKeys, AreRefusedWhereTheDataCannotServeThem) {
  auto refused_key = [](const std::vector<std::string>& overrides) -> std::string {
    try {
      Trainer trainer(plan::resolve_run(synthetic(overrides), cpu(), {}));
    } catch (const ConfigError& e) {
      return e.key();
    }
    return "";
  };
  EXPECT_EQ(refused_key({"data.targets=2", "train.target_accuracy=0.9"}), "train.target_accuracy");
  EXPECT_EQ(refused_key({"data.targets=2", "train.early_stopping.metric=accuracy"}), "train.early_stopping.metric");
  EXPECT_EQ(refused_key({"train.tta.hflip=true"}), "train.tta.hflip");
  EXPECT_EQ(refused_key({"train.tta.translate=1"}), "train.tta.translate");
  EXPECT_EQ(refused_key({"data.targets=2", "train.early_stopping.patience=2"}), "");  // auto: the loss
}

}  // namespace
}  // namespace gputrain::train
