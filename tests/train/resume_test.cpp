// Resuming from any checkpoint, or after a stop request, ends bitwise where an
// uninterrupted run ends; non-finite losses stop or are skipped (CPU).
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/config/load.h"
#include "gputrain/data/export.h"
#include "gputrain/data/generate.h"
#include "gputrain/device/resolve.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/plan/start.h"
#include "gputrain/train/trainer.h"
#include "support/temp_dir.h"
#include "train/recorder.h"

namespace gputrain::train {
namespace {

using testing::TempDir;

// Also asks the trainer to stop after micro-batch `batch` of epoch `epoch`.
struct StoppingRecorder : Recorder {
  StoppingRecorder(StopToken& token, int64_t epoch, int64_t batch) : token(token), epoch(epoch), batch(batch) {}
  void on_progress(const Progress& p) override {
    if (p.epoch == epoch && p.batch == batch) token.request_stop();
  }
  StopToken& token;
  int64_t epoch;
  int64_t batch;
};

// Dropout draws from the CPU generator and Adam and momentum carry state, so
// every part of a checkpoint matters; 320 samples in batches of 32 over
// micro-batches of 16 make 10 steps and 20 micro-batches per epoch.
config::LoadedConfig run_config(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> overrides{"train.epochs=3"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config::load_config_text(R"(
name: r
seed: 11
device: cpu
data: {dataset: synthetic, samples: 320, test_samples: 64, features: 6, classes: 3, batch_size: 32,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [12], dropout: 0.25}
optim: {name: adam, lr: 0.01, scheduler: cosine}
train: {accumulation_steps: 2, log_every: 3}
checkpoint: {every: 1, every_steps: 4, keep: 100}
)",
                                  "r.yaml", overrides);
}

device::DevicePlan cpu() { return device::DevicePlan{}; }

// Ops this small run fastest on one thread; OpenMP's spinning workers slow
// them tenfold on a busy machine, and both sides of each comparison run alike.
class Resume : public ::testing::Test {
 protected:
  void SetUp() override { torch::set_num_threads(1); }
};
using OnNan = Resume;

// Metrics that do not measure time, as one comparable list.
std::vector<std::vector<double>> values(const Recorder& r) {
  std::vector<std::vector<double>> out;
  for (const auto& s : r.steps) {
    out.push_back(
        {0.0, double(s.epoch), double(s.step), s.loss, s.accuracy.value_or(-1), s.lr, double(s.skipped_steps)});
  }
  for (const auto& e : r.epochs) {
    out.push_back({1.0, double(e.epoch), double(e.step), e.train.loss_sum, double(e.train.correct),
                   double(e.train.samples), e.test.loss_sum, double(e.test.correct), e.lr});
  }
  return out;
}

void expect_same_weights(const torch::nn::Sequential& a, const torch::nn::Sequential& b) {
  const auto p = a->parameters();
  const auto q = b->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(p[i], q[i])) << "parameter " << i;
}

// The records of `all` at or after `from` (by step, then kind).
std::vector<std::vector<double>> tail(const std::vector<std::vector<double>>& all,
                                      const std::vector<std::vector<double>>& like) {
  std::vector<std::vector<double>> out;
  for (const auto& row : all) {
    for (const auto& wanted : like) {
      if (row[0] == wanted[0] && row[2] == wanted[2]) out.push_back(row);
    }
  }
  return out;
}

// Runs `loaded` through, then resumes from each of its checkpoints that
// `wanted` picks (by its index among the 10) and expects the same ending.
template <typename Wanted>
void resume_from_checkpoints(const config::LoadedConfig& loaded, Wanted wanted) {
  TempDir dir;
  Trainer full(plan::resolve_run(loaded, cpu(), {}));
  Recorder whole;
  FitOptions options;
  options.checkpoint_dir = dir / "checkpoints";
  full.fit(whole, options);
  const auto checkpoints = checkpoint::list_checkpoints(dir / "checkpoints");
  ASSERT_EQ(checkpoints.size(), 3u + 7u);  // 3 epoch ends, steps 4, 8, ..., 28
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    if (!wanted(i)) continue;
    const auto& path = checkpoints[i];
    SCOPED_TRACE(path.filename().string());
    Trainer resumed(plan::resolve_run(loaded, cpu(), {}));
    resumed.resume(checkpoint::Checkpoint::read(path));
    Recorder rest;
    resumed.fit(rest);
    expect_same_weights(resumed.model(), full.model());
    const auto got = values(rest);
    EXPECT_EQ(got, tail(values(whole), got));
  }
}

bool every(std::size_t) { return true; }

TEST_F(Resume, FromEveryCheckpointEndsBitwiseLikeTheUninterruptedRun) { resume_from_checkpoints(run_config(), every); }

// Checkpoints also keep the weight average, the early-stopping count and the
// best weights, evaluations every 5 steps falling between checkpoints and on them.
TEST_F(Resume, WithTheWeightAverageAndEarlyStoppingEndsBitwiseLikeTheUninterruptedRun) {
  resume_from_checkpoints(run_config({"train.ema.decay=0.8", "train.ema.every=3", "train.eval_every_steps=5",
                                      "train.early_stopping.patience=50", "train.early_stopping.metric=loss",
                                      "train.early_stopping.restore_best=true"}),
                          every);
}

// optim.lookahead's slow weights are in every checkpoint: syncs every 3 steps
// fall between the checkpoints (every 4 steps and at epoch ends), where a
// resumed run that began them afresh would end elsewhere; train.ema averages
// the synced weights beside it.
TEST_F(Resume, WithLookaheadEndsBitwiseLikeTheUninterruptedRun) {
  resume_from_checkpoints(run_config({"optim.lookahead.k=3", "optim.lookahead.alpha=0.6", "train.ema.decay=0.8"}),
                          every);
}

// A checkpoint written without optim.lookahead resumes with it on (its slow
// weights start from the checkpoint's weights; alpha 1 makes each sync change
// nothing, so the run ends as the plain one), and one written with it resumes
// with it off (its slow weights unused: the run goes on from its weights).
TEST_F(Resume, AcrossLookaheadOnAndOffLoadsAndTrainsOn) {
  TempDir dir;
  const auto plain = run_config();
  Trainer full(plan::resolve_run(plain, cpu(), {}));
  Recorder whole;
  FitOptions options;
  options.checkpoint_dir = dir / "plain";
  full.fit(whole, options);
  const auto plain_checkpoint = checkpoint::list_checkpoints(dir / "plain").at(1);  // step 8
  Trainer turned_on(plan::resolve_run(run_config({"optim.lookahead.k=3", "optim.lookahead.alpha=1"}), cpu(), {}));
  turned_on.resume(checkpoint::Checkpoint::read(plain_checkpoint));
  Recorder rest;
  turned_on.fit(rest);
  expect_same_weights(turned_on.model(), full.model());

  const auto with_lookahead = run_config({"optim.lookahead.k=3"});
  Trainer first(plan::resolve_run(with_lookahead, cpu(), {}));
  options.checkpoint_dir = dir / "lookahead";
  first.fit(rest, options);
  const checkpoint::Checkpoint stored =
      checkpoint::Checkpoint::read(checkpoint::list_checkpoints(dir / "lookahead").at(1));
  ASSERT_FALSE(stored.state().lookahead.empty());
  Trainer turned_off(plan::resolve_run(plain, cpu(), {}));
  turned_off.resume(stored);
  const TrainSummary summary = turned_off.fit(rest);
  EXPECT_EQ(summary.epochs, 3);
  EXPECT_EQ(summary.steps, 30);
}

// Two parameter groups (decayed weights; biases without decay at lr × 8)
// under the trapezoid schedule (30 steps: 6 up, 15 down), in the fused and
// the plain step: each group's state and options come back from a checkpoint
// in the warm-up (step 4), mid-epoch at full lr (12) and in the cool-down (28).
TEST_F(Resume, WithParameterGroupsEndsBitwiseLikeTheUninterruptedRun) {
  for (const std::string fused : {"true", "false"}) {
    SCOPED_TRACE("optim.fused=" + fused);
    resume_from_checkpoints(
        run_config({"optim.fused=" + fused, "optim.weight_decay=0.01", "optim.no_decay_bias_norm=true",
                    "optim.bias_lr_multiplier=8", "optim.scheduler=linear_warmup_decay", "optim.warmup_fraction=0.2",
                    "optim.cooldown_fraction=0.5"}),
        [](std::size_t i) { return i == 0 || i == 3 || i == 8; });
  }
}

// optim.muon keeps a momentum buffer per parameter, Muon's for the two
// convolution weights and SGD's for the rest (or Adam's state for all, with
// adam and adamw): a small convolutional network on generated 28 x 28 images
// (320 of them: the same 10 steps per epoch), resumed at a step (4), at an
// epoch's end (the third) and late (28); and with SGD again with
// optim.lookahead around it.
TEST_F(Resume, WithMuonEndsBitwiseLikeTheUninterruptedRun) {
  TempDir data;
  data::write_idx_set(data.path(), {320, 64, 5, false}, /*gzip=*/false);
  const std::vector<std::vector<std::string>> runs{
      {"optim.lookahead.k=0"},
      {"optim.lookahead.k=3"},
      {"optim.name=adam", "optim.momentum=0", "optim.nesterov=false", "optim.lr=0.01", "optim.weight_decay=0.01"},
      {"optim.name=adamw", "optim.momentum=0", "optim.nesterov=false", "optim.lr=0.01", "optim.weight_decay=0.1"}};
  for (const std::vector<std::string>& overrides : runs) {
    SCOPED_TRACE(overrides.front());
    const auto loaded = config::load_config_text(R"(
name: m
seed: 11
device: cpu
data: {dataset: fashion_mnist, root: )" + data.path().string() +
                                                     R"(, batch_size: 32, num_workers: 0, pin_memory: false}
model:
  layers:
    - {type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false}
    - batchnorm
    - relu
    - {type: maxpool, kernel: 4}
    - {type: conv2d, out_channels: 4, kernel: 3, padding: 1, bias: false}
    - batchnorm
    - relu
    - flatten
    - linear
optim: {name: sgd, lr: 0.05, momentum: 0.8, nesterov: true, scheduler: cosine, muon: {lr: 0.1, momentum: 0.6}}
train: {epochs: 3, accumulation_steps: 2, log_every: 3}
checkpoint: {every: 1, every_steps: 4, keep: 100}
)",
                                                 "m.yaml", overrides);
    resume_from_checkpoints(loaded, [](std::size_t i) { return i == 0 || i == 3 || i == 9; });
  }
}

// A whitening first convolution whose bias trains for its first epoch only
// (whiten_bias_epochs: 1) on generated 28 x 28 images (10 steps an epoch),
// under SGD with momentum and weight decay, which go on moving a bias whose
// gradient stops but whose lr does not.
config::LoadedConfig whitening_run(const TempDir& data, int bias_epochs, const std::vector<std::string>& overrides) {
  return config::load_config_text(R"(
name: w
seed: 11
device: cpu
data: {dataset: fashion_mnist, root: )" +
                                      data.path().string() +
                                      R"(, batch_size: 32, num_workers: 0, pin_memory: false}
model:
  layers:
    - {type: conv2d, out_channels: 8, kernel: 2, whiten: 64, whiten_bias_epochs: )" +
                                      std::to_string(bias_epochs) + R"(}
    - relu
    - {type: maxpool, kernel: 3}
    - flatten
    - linear
optim: {name: sgd, lr: 0.05, momentum: 0.8, nesterov: true, weight_decay: 0.01}
train: {epochs: 3, accumulation_steps: 2, log_every: 3}
checkpoint: {every: 1, every_steps: 4, keep: 100}
)",
                                  "w.yaml", overrides);
}

torch::Tensor first_bias(const Trainer& trainer) { return trainer.model()->named_parameters()["conv1.bias"].clone(); }

// The bias moves in the first epoch and not after it: a 3-epoch run ends with
// the bias a 1-epoch run ends with (optim.scheduler none: the same first
// epoch), and without the key it ends elsewhere.
TEST_F(Resume, WhiteningBiasTrainsForItsFirstEpochsOnly) {
  TempDir data;
  data::write_idx_set(data.path(), {320, 64, 5, false}, /*gzip=*/false);
  const auto bias_after = [&](int bias_epochs, const std::vector<std::string>& overrides,
                              torch::Tensor* initial = nullptr) {
    Trainer trainer(plan::resolve_run(whitening_run(data, bias_epochs, overrides), cpu(), {}));
    if (initial != nullptr) *initial = first_bias(trainer);
    Recorder recorder;
    FitOptions options;
    trainer.fit(recorder, options);
    return first_bias(trainer);
  };
  torch::Tensor initial;
  const torch::Tensor one_epoch = bias_after(1, {"train.epochs=1"}, &initial);
  EXPECT_FALSE(torch::equal(one_epoch, initial));
  EXPECT_TRUE(torch::equal(bias_after(1, {}), one_epoch));
  EXPECT_FALSE(torch::equal(bias_after(0, {}), one_epoch));
}

// Resumed before, at and after the first epoch's end, under a cosine schedule,
// the run ends bitwise as the uninterrupted one.
TEST_F(Resume, AcrossTheWhiteningBiasFreezeEndsBitwiseLikeTheUninterruptedRun) {
  TempDir data;
  data::write_idx_set(data.path(), {320, 64, 5, false}, /*gzip=*/false);
  resume_from_checkpoints(whitening_run(data, 1, {"optim.scheduler=cosine"}), [](std::size_t i) { return i <= 4; });
}

// A stop request ends the run at a step boundary with a checkpoint; resuming
// it matches the uninterrupted run, metrics included, wherever it stopped.
void stop_and_resume(int64_t epoch, int64_t micro_batch) {
  SCOPED_TRACE(::testing::Message() << "stop after micro-batch " << micro_batch << " of epoch " << epoch);
  TempDir dir;
  const auto loaded = run_config({"checkpoint.every=0", "checkpoint.every_steps=0"});
  Trainer full(plan::resolve_run(loaded, cpu(), {}));
  Recorder whole;
  full.fit(whole);

  StopToken token;
  StoppingRecorder first(token, epoch, micro_batch);
  FitOptions options;
  options.checkpoint_dir = dir / "checkpoints";
  options.stop = &token;
  const TrainSummary stopped = Trainer(plan::resolve_run(loaded, cpu(), {})).fit(first, options);
  ASSERT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.steps, (epoch - 1) * 10 + (micro_batch + 1) / 2);  // the step in progress finishes
  ASSERT_EQ(checkpoint::list_checkpoints(dir / "checkpoints").size(), 1u);
  EXPECT_EQ(stopped.checkpoint, checkpoint::list_checkpoints(dir / "checkpoints").front().string());

  Trainer resumed(plan::resolve_run(loaded, cpu(), {}));
  resumed.resume(checkpoint::Checkpoint::read(stopped.checkpoint));
  Recorder second;
  FitOptions again;  // the token still says stop
  again.checkpoint_dir = options.checkpoint_dir;
  const TrainSummary rest = resumed.fit(second, again);
  EXPECT_FALSE(rest.stopped);
  expect_same_weights(resumed.model(), full.model());
  auto joined = values(first);
  const auto more = values(second);
  joined.insert(joined.end(), more.begin(), more.end());
  std::sort(joined.begin(), joined.end());
  auto expected = values(whole);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(joined, expected);
}

TEST_F(Resume, AfterAStopMidEpochOrBeforeTheTestPass) {
  stop_and_resume(2, 7);   // mid-step: the step of micro-batches 7 and 8 completes first
  stop_and_resume(1, 19);  // the epoch's last step (micro-batches 19 and 20), before its test pass
}

// Issue 17 #19: a crafted position the config cannot reach is refused, naming
// the file, before anything is restored.
TEST_F(Resume, ImpossiblePositionIsACheckpointErrorNamingTheFile) {
  const auto loaded = run_config();  // 3 epochs of 10 steps (20 micro-batches)
  const plan::RunPlan run = plan::resolve_run(loaded, cpu(), {});
  Trainer trainer(run);
  torch::optim::SGD sgd(trainer.model()->parameters(), 0.1);
  const std::vector<std::pair<checkpoint::Position, std::string>> cases{{{4, 0, 40}, "lies beyond train.epochs (3)"},
                                                                        {{3, 2, 31}, "lies beyond train.epochs (3)"},
                                                                        {{2, 0, 1}, "fewer steps than epochs"},
                                                                        {{1, 21, 20}, "but an epoch has 20 here"}};
  for (const auto& [at, problem] : cases) {
    checkpoint::TrainingState state;
    state.position = at;
    state.rng = checkpoint::capture_rng();
    state.config = config::dump_config(loaded.config);
    const auto crafted =
        checkpoint::Checkpoint::parse(checkpoint::encode(state, *trainer.model(), sgd), "crafted.ckpt");
    try {
      plan::check_resumable(crafted, run);
      ADD_FAILURE() << "accepted epoch " << at.epoch << ", micro-batch " << at.batch << ", step " << at.step;
    } catch (const CheckpointError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("crafted.ckpt: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
    }
  }
}

// An infinite learning rate makes every weight inf or NaN after step 1. The
// config refuses one, so it is set behind the loader's back.
config::LoadedConfig diverging(const std::vector<std::string>& extra) {
  config::LoadedConfig loaded = run_config(extra);
  loaded.config.optim.lr = std::numeric_limits<double>::infinity();
  return loaded;
}

// Trains to train.on_nan: stop's error, which must name `where` and the last
// good checkpoint, `checkpoint` in `checkpoints`.
void expect_nan_stop(Trainer& trainer, const std::filesystem::path& checkpoints, const std::string& where,
                     const std::string& checkpoint) {
  Recorder recorder;
  FitOptions options;
  options.checkpoint_dir = checkpoints;
  try {
    trainer.fit(recorder, options);
    FAIL() << "training went on";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kRuntime);
    const std::string message = e.what();
    EXPECT_NE(message.find(where + ": the loss is not finite"), std::string::npos) << message;
    EXPECT_NE(message.find("The last good checkpoint is " + (checkpoints / checkpoint).string()), std::string::npos)
        << message;
  }
}

TEST_F(OnNan, StopNamesTheEpochStepAndLastCheckpoint) {
  TempDir dir;
  Trainer trainer(plan::resolve_run(diverging({"optim.scheduler=none", "checkpoint.every_steps=1"}), cpu(), {}));
  expect_nan_stop(trainer, dir / "checkpoints", "epoch 1, step 2", "ckpt-s00000001-e0000-b000002.ckpt");
}

TEST_F(OnNan, SkipCountsTheSkippedStepsAndFinishes) {
  Trainer trainer(plan::resolve_run(diverging({"optim.scheduler=none", "train.on_nan=skip"}), cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  EXPECT_EQ(summary.steps, 30);
  ASSERT_EQ(recorder.epochs.size(), 3u);
  EXPECT_EQ(recorder.epochs.back().skipped_steps, 29);   // all but the first
  EXPECT_EQ(recorder.epochs.front().train.samples, 32);  // only the first step's batch counts
  EXPECT_EQ(recorder.steps.back().skipped_steps, 29);
}

// 64 training samples in 8 batches a step, in order, a regression whose
// `poisoned` samples have a target of 3e38: their squared error overflows
// float32, so the steps holding them have an inf loss while the weights stay
// sound. (NaN inputs would do it too, but the npy loader refuses them.)
config::LoadedConfig poisoned_run(const TempDir& dir, const std::vector<int64_t>& poisoned,
                                  const std::vector<std::string>& extra) {
  torch::manual_seed(3);
  torch::Tensor targets = torch::randn({64});
  for (int64_t sample : poisoned) targets[sample] = 3e38F;
  data::write_npy(dir / "train_inputs.npy", torch::randn({64, 6}));
  data::write_npy(dir / "train_targets.npy", targets);
  data::write_npy(dir / "test_inputs.npy", torch::randn({16, 6}));
  data::write_npy(dir / "test_targets.npy", torch::randn({16}));
  std::vector<std::string> overrides{"data.root=" + (dir / "").string()};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return config::load_config_text(R"(
name: p
seed: 2
device: cpu
data: {dataset: npy, batch_size: 8, shuffle: false, num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [12]}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
train: {epochs: 2, log_every: 4}
checkpoint: {every: 0, every_steps: 0, keep: 100}
)",
                                  "p.yaml", overrides);
}

bool all_finite(const torch::nn::Module& model) {
  for (const auto& t : model.parameters()) {
    if (!torch::isfinite(t).all().item<bool>()) return false;
  }
  for (const auto& t : model.buffers()) {
    if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>()) return false;
  }
  return true;
}

// Issue 36: the check runs on the device (as under the CUDA graph) and is read
// at the log interval; stop names the interval's non-finite steps and the last
// good checkpoint, written before them, and nothing after them is saved.
TEST_F(OnNan, StopAtTheNextReadNamesTheStepsAndSavesNothingAfterThem) {
  TempDir data;
  TempDir out;
  // Steps 5 and 7 (samples 32-39 and 48-55); a checkpoint every 3 steps would be due at step 6.
  Trainer trainer(
      plan::resolve_run(poisoned_run(data, {33, 50}, {"checkpoint.every_steps=3", "train.log_every=8"}), cpu(), {}));
  expect_nan_stop(trainer, out / "checkpoints", "epoch 1, step 5", "ckpt-s00000003-e0000-b000003.ckpt");
  std::vector<std::string> written;
  for (const auto& entry : std::filesystem::directory_iterator(out / "checkpoints")) {
    written.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(written, std::vector<std::string>{"ckpt-s00000003-e0000-b000003.ckpt"});
  EXPECT_TRUE(all_finite(*trainer.model()));  // the NaN steps updated nothing

  // Without a checkpoint in between, the log interval at step 8 sees both.
  Trainer later(plan::resolve_run(poisoned_run(data, {33, 50}, {"train.log_every=8"}), cpu(), {}));
  try {
    Recorder recorder;
    later.fit(recorder);
    FAIL() << "training went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 1, steps 5 to 7: the loss is not finite (inf or NaN) at 2 of them"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(all_finite(*later.model()));
}

// The same check inside the CUDA graph (captured at step 4): a NaN in a
// warm-up step and one in a replayed step, both seen at the log interval.
TEST_F(OnNan, StopUnderTheCudaGraphNamesTheStepsOfTheInterval_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  TempDir data;
  device::DevicePlan gpu;
  gpu.kind = device::DeviceKind::kCuda;
  gpu.gpus = {0};
  Trainer trainer(plan::resolve_run(
      poisoned_run(data, {10, 33}, {"device=cuda", "train.log_every=8", "train.cuda_graph=true"}), gpu, {}));
  Recorder recorder;
  try {
    trainer.fit(recorder);
    FAIL() << "training went on";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 1, steps 2 to 5: the loss is not finite (inf or NaN) at 2 of them"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(all_finite(*trainer.model()));
}

TEST_F(OnNan, SkipLeavesTheNonFiniteStepsOutOfTheUpdateAndTheMetrics) {
  TempDir data;
  Trainer trainer(plan::resolve_run(poisoned_run(data, {33}, {"train.on_nan=skip"}), cpu(), {}));
  Recorder recorder;
  const TrainSummary summary = trainer.fit(recorder);
  EXPECT_EQ(summary.steps, 16);
  ASSERT_EQ(recorder.epochs.size(), 2u);
  EXPECT_EQ(recorder.epochs.front().skipped_steps, 1);
  EXPECT_EQ(recorder.epochs.back().skipped_steps, 2);
  EXPECT_EQ(recorder.epochs.front().train.samples, 56);
  EXPECT_TRUE(std::isfinite(recorder.epochs.front().train.mean_loss()));
  EXPECT_TRUE(std::isfinite(recorder.steps.at(1).loss)) << "the interval of steps 5-8";
  EXPECT_TRUE(all_finite(*trainer.model()));
}

}  // namespace
}  // namespace gputrain::train
