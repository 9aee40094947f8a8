// Short end-to-end runs of the training loop on generated data (CPU).
#include <gtest/gtest.h>

#include <string>

#include "gputrain/checkpoint/weights.h"
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

TEST(Trainer, LossFallsAndEveryEventArrives) {
  Trainer trainer(plan::resolve_run(synthetic_run(), cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  ASSERT_EQ(recorder.epochs.size(), 4u);
  EXPECT_LT(recorder.epochs.back().train.mean_loss(), recorder.epochs.front().train.mean_loss());
  EXPECT_GT(summary.last_test.accuracy(), 1.0 / 3.0 + 0.1);
  EXPECT_EQ(summary.steps, 4 * 8);
  EXPECT_EQ(recorder.steps.size(), 8u);  // every 4th of 32 steps
  EXPECT_EQ(recorder.steps.front().step, 4);
  EXPECT_EQ(recorder.progress_calls, 32);
  EXPECT_EQ(recorder.epochs.back().test.samples, 128);
}

// Every epoch reports the arithmetic it did: the MLP 8 -> 16 -> 3 is 8*16 + 16*3 = 176 multiply-adds a sample
// forward, 6 x 176 FLOPs a training sample; on the CPU its share is of the measured float32 peak.
TEST(Trainer, EachEpochReportsItsTflopsAndItsShareOfThePeak) {
  Trainer trainer(plan::resolve_run(synthetic_run(), cpu(), {}));
  Recorder recorder;
  trainer.fit(recorder);
  ASSERT_EQ(recorder.epochs.size(), 4u);
  for (const EpochMetrics& m : recorder.epochs) {
    ASSERT_TRUE(m.tflops && m.peak_share) << "epoch " << m.epoch;
    EXPECT_DOUBLE_EQ(*m.tflops, 6.0 * 176 * m.samples_per_s / 1e12);
    EXPECT_GT(*m.peak_share, 0);
  }
}

// Each step's sums go into the epoch's and the interval's running sums, which
// add CPU scalars in place: neither may write into the other. Logging every
// step closes each interval before the next step adds to it, so that run's
// epoch sums are the reference for a run that logs every 4th step.
TEST(Trainer, EpochSumsDoNotDependOnTheLogInterval) {
  auto epoch_sums = [](const std::string& log_every) {
    Trainer trainer(plan::resolve_run(synthetic_run({"train.epochs=1", "train.log_every=" + log_every}), cpu(), {}));
    Recorder recorder;
    trainer.fit(recorder);
    return recorder.epochs.at(0).train;
  };
  const step::EvalResult every_step = epoch_sums("1");
  const step::EvalResult every_4th = epoch_sums("4");
  EXPECT_EQ(every_4th.samples, 256);
  EXPECT_EQ(every_4th.correct, every_step.correct);
  EXPECT_DOUBLE_EQ(every_4th.loss_sum, every_step.loss_sum);
}

TEST(Trainer, TestSplitIsCountedByClass) {
  Trainer trainer(plan::resolve_run(synthetic_run({"train.epochs=1"}), cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  const std::vector<int64_t>& confusion = summary.last_test.confusion;
  ASSERT_EQ(confusion.size(), 9u);  // 3 x 3
  int64_t samples = 0;
  for (int64_t n : confusion) samples += n;
  EXPECT_EQ(samples, 128);
  EXPECT_EQ(confusion[0] + confusion[4] + confusion[8], summary.last_test.correct);
}

TEST(Trainer, ClassWeightsWeightTheLossAndMustFitTheClasses) {
  Trainer plain(plan::resolve_run(synthetic_run({"train.epochs=1"}), cpu(), {}));
  Trainer weighted(plan::resolve_run(synthetic_run({"train.epochs=1", "train.class_weights=[1, 3, 1]"}), cpu(), {}));
  Recorder quiet;
  const step::EvalResult a = plain.fit(quiet).last_test;
  const step::EvalResult b = weighted.fit(quiet).last_test;
  EXPECT_NE(a.loss_sum, b.loss_sum);
  try {
    Trainer wrong(plan::resolve_run(synthetic_run({"train.class_weights=[1, 3]"}), cpu(), {}));
    ADD_FAILURE() << "two weights for three classes were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set #1 (train.class_weights=[1, 3]): train.class_weights: 2 weights given "
                                         "but the data set has 3 classes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(synthetic_run({"train.class_weights=[1, 0, 1]"}), ConfigError);
}

// At lr 1e-30 the float32 weights stay put: label smoothing changes the training loss
// alone, the test loss being the plain cross-entropy.
TEST(Trainer, LabelSmoothingSmoothsTheTrainingLossOnlyAndNeedsClasses) {
  Recorder plain_events;
  Recorder smoothed_events;
  Trainer plain(plan::resolve_run(synthetic_run({"train.epochs=1", "optim.lr=1e-30", "optim.momentum=0"}), cpu(), {}));
  Trainer smoothed(plan::resolve_run(
      synthetic_run({"train.epochs=1", "optim.lr=1e-30", "optim.momentum=0", "train.label_smoothing=0.3"}), cpu(), {}));
  const TrainSummary a = plain.fit(plain_events);
  const TrainSummary b = smoothed.fit(smoothed_events);
  EXPECT_GT(std::abs(a.last_train.mean_loss() - b.last_train.mean_loss()), 1e-3);
  EXPECT_EQ(a.last_test.loss_sum, b.last_test.loss_sum);
  try {
    Trainer regression(plan::resolve_run(synthetic_run({"data.targets=2", "train.label_smoothing=0.1"}), cpu(), {}));
    ADD_FAILURE() << "label smoothing of a regression was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.label_smoothing") << e.what();
  }
}

TEST(Trainer, LayoutAndLoaderWaitAreReported) {
  // 250 samples in micro-batches of 32 / 2 = 16: 15 full ones and a last of 10.
  // The host loader: the device cache (auto on the CPU) makes batches without waiting.
  Trainer trainer(plan::resolve_run(synthetic_run({"data.samples=250", "train.accumulation_steps=2", "train.epochs=1",
                                                   "data.num_workers=1", "data.device_cache=off"}),
                                    cpu(), {}));
  const plan::TrainLayout layout = trainer.layout();
  EXPECT_EQ(layout.strategy.kind, parallel::StrategyKind::kSingle);
  EXPECT_EQ(layout.train_samples, 250);
  EXPECT_EQ(layout.batch.micro, 16);
  EXPECT_EQ(layout.batch.last_micro, 10);
  EXPECT_EQ(layout.batch.steps_per_epoch, 8);
  EXPECT_TRUE(layout.labeled);
  EXPECT_TRUE(layout.classification);
  Recorder recorder;
  trainer.fit(recorder);
  ASSERT_EQ(recorder.epochs.size(), 1u);
  const EpochMetrics& m = recorder.epochs[0];
  EXPECT_GT(m.loader_wait_s, 0.0) << "the first batch is always waited for";
  EXPECT_LE(m.loader_wait_s, m.epoch_s);
  EXPECT_EQ(Trainer(plan::resolve_run(synthetic_run({"data.samples=250", "data.drop_last=true"}), cpu(), {}))
                .layout()
                .batch.last_micro,
            32);
}

TEST(Trainer, SameSeedSameLosses) {
  Recorder a;
  Recorder b;
  Trainer(plan::resolve_run(synthetic_run(), cpu(), {})).fit(a);
  Trainer(plan::resolve_run(synthetic_run(), cpu(), {})).fit(b);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << i;
  EXPECT_EQ(a.epochs.back().test.loss_sum, b.epochs.back().test.loss_sum);
}

// Caffe's CheckAccumulation: K micro-batches of B/K make the same update as one batch of B.
TEST(Trainer, AccumulationMatchesTheLargerBatch) {
  const std::vector<std::string> common{"data.batch_size=128", "optim.momentum=0", "train.epochs=2",
                                        "data.samples=320"};  // 320 = 2 full steps + a short last group
  auto with = [&](const std::string& accumulation) {
    auto overrides = common;
    overrides.push_back(accumulation);
    Trainer trainer(plan::resolve_run(synthetic_run(overrides), cpu(), {}));
    Recorder recorder;
    trainer.fit(recorder);
    return trainer.model();
  };
  const auto whole = with("train.accumulation_steps=1");
  const auto split = with("train.accumulation_steps=4");
  const auto p = whole->parameters();
  const auto q = split->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << i;
}

TEST(Trainer, BothBatchFormsGiveTheSameRun) {
  auto trained = [](const std::vector<std::string>& batch) {
    std::vector<std::string> overrides{"train.accumulation_steps=2", "train.epochs=1", "data.samples=100"};
    overrides.insert(overrides.end(), batch.begin(), batch.end());
    Trainer trainer(plan::resolve_run(synthetic_run(overrides), cpu(), {}));
    Recorder recorder;
    trainer.fit(recorder);
    EXPECT_EQ(trainer.layout().batch.micro, 16);
    return std::make_pair(trainer.model(), recorder.steps.size());
  };
  const auto [per_step, per_step_count] = trained({"data.batch_size=32"});
  const auto [per_pass, per_pass_count] = trained({"data.micro_batch_size=16"});
  EXPECT_EQ(per_step_count, per_pass_count);
  const auto p = per_step->parameters();
  const auto q = per_pass->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(p[i], q[i])) << i;
}

TEST(Trainer, BatchMustDivideIntoMicroBatches) {
  try {
    Trainer trainer(plan::resolve_run(synthetic_run({"data.batch_size=30", "train.accumulation_steps=4"}), cpu(), {}));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set #1 (data.batch_size=30): data.batch_size: 30 is not divisible"),
              std::string::npos)
        << e.what();
  }
}

TEST(Trainer, RegressionTrainsWithMse) {
  const auto loaded = config::load_config_text(R"(
device: cpu
data: {dataset: synthetic, samples: 256, test_samples: 64, features: 10, targets: 1, batch_size: 16, num_workers: 0,
       pin_memory: false}
model: {name: linear}
optim: {name: sgd, lr: 0.05}
train: {epochs: 3, loss: mse}
)",
                                               "r.yaml");
  Trainer trainer(plan::resolve_run(loaded, cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  EXPECT_FALSE(summary.last_test.classification);
  EXPECT_LT(recorder.epochs.back().test.mean_loss(), recorder.epochs.front().test.mean_loss());
}

TEST(Trainer, SavedWeightsReproduceTheTestResult) {
  testing::TempDir dir;
  const auto loaded = synthetic_run({"train.epochs=1"});
  Trainer trainer(plan::resolve_run(loaded, cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  const std::string path = (dir / "model.pt").string();
  checkpoint::save_weights(trainer.model(), path);
  const step::EvalResult again = test_saved_weights(loaded, path);
  EXPECT_EQ(again.correct, summary.last_test.correct);
  EXPECT_NEAR(again.mean_loss(), summary.last_test.mean_loss(), 1e-6);
}

TEST(Trainer, ForeignOrCorruptWeightsAreCheckpointErrors) {
  testing::TempDir dir;
  const auto loaded = synthetic_run();
  EXPECT_THROW(test_saved_weights(loaded, (dir / "missing.pt").string()), CheckpointError);
  testing::write_text(dir / "junk.pt", "not a torch archive");
  EXPECT_THROW(test_saved_weights(loaded, (dir / "junk.pt").string()), CheckpointError);
  Trainer other(plan::resolve_run(synthetic_run({"model.hidden=[7]"}), cpu(), {}));
  checkpoint::save_weights(other.model(), (dir / "other.pt").string());
  EXPECT_THROW(test_saved_weights(loaded, (dir / "other.pt").string()), CheckpointError);
}

}  // namespace
}  // namespace gputrain::train
