// A run resolved once (issue 38): the devices, the processes, the strategy,
// the data, the batches, the model's facts, the step and the evaluation in one place, nothing written back into the
// config, for train, bench, test, predict and `gputrain plan` alike; `plan` collects every problem instead of the
// first.
#include "gputrain/plan/run_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <torch/nn/modules/linear.h>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/data/description.h"
#include "gputrain/data/export.h"
#include "gputrain/data/tensor_dataset.h"
#include "gputrain/device/cpu_share.h"
#include "support/machine.h"
#include "support/temp_dir.h"

namespace gputrain::plan {
namespace {

config::LoadedConfig run_config(const std::vector<std::string>& overrides = {}) {
  return config::load_config_text(R"(
seed: 3
data: {dataset: synthetic, samples: 100, test_samples: 20, features: 8, classes: 3, batch_size: 32,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [16]}
)",
                                  "exp.yaml", overrides);
}

using gputrain::testing::machine;

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(RunPlan, ResolvesDevicesStrategyDataAndBatchesInOneCall) {
  const RunPlan run = resolve_run(run_config({"train.accumulation_steps=2"}), RunRequest{});
  EXPECT_EQ(run.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(run.processes.workers, 0);
  EXPECT_EQ(run.strategy.kind, parallel::StrategyKind::kSingle);
  ASSERT_TRUE(run.train_set && run.test_set);
  EXPECT_EQ(run.test_set->info().samples, 20);
  EXPECT_EQ(run.batch.micro, 16);
  EXPECT_EQ(run.batch.steps_per_epoch, 4);
  // Both splits' device caches, decided here for the builder and `gputrain plan` alike.
  EXPECT_TRUE(run.device_cache.train.on);
  EXPECT_TRUE(run.device_cache.test.on);
  const RunPlan uncached = resolve_run(run_config({"data.device_cache=off"}), RunRequest{});
  EXPECT_FALSE(uncached.device_cache.train.on);
  EXPECT_EQ(uncached.device_cache.test.why, "set");
}

// data.decode_threads serve the host loader's image-by-image work (files under
// data.cache: none, per-image augmentation): set, or auto the CPUs this
// process may use; a split that needs none gets none.
// Commands read the plan's pieces, not the config it holds (issue 61): every way into the plan fills them.
TEST(RunPlan, EveryResolutionGivesItsReadersTheConfigsPieces) {
  const std::vector<std::string> set{"name=pieces",          "train.epochs=7",          "train.log_every=3",
                                     "train.on_sigint=stop", "train.tensorboard=false", "model.freeze_batchnorm=train"};
  const config::LoadedConfig loaded = run_config(set);
  const auto expect_pieces = [&](const RunPlan& run, const char* how) {
    SCOPED_TRACE(how);
    EXPECT_EQ(run.name, "pieces");
    EXPECT_EQ(run.seed, 3u);
    EXPECT_EQ(config::word(run.network.name), "mlp");
    EXPECT_EQ(run.network.freeze_batchnorm, config::FrozenBatchnorm::kTrain);
    EXPECT_EQ(run.data.samples, 100);
    EXPECT_EQ(run.loop.epochs, 7);
    EXPECT_EQ(run.loop.log_every, 3);
    EXPECT_EQ(run.loop.on_sigint, config::OnSigint::kStop);
    EXPECT_EQ(run.loop.config_text, config::dump_config(loaded.config)) << "what checkpoints keep, as written";
  };
  const auto expect_outputs = [&](const RunPlan& run) {
    EXPECT_FALSE(run.outputs.tensorboard);
    EXPECT_EQ(run.outputs.params.at("name"), "pieces");
    EXPECT_EQ(run.outputs.checkpoint_dir, config::checkpoint_directory(loaded.config));
    EXPECT_EQ(run.batch.stated_at.str(), "exp.yaml:3:97") << "data.batch_size's place, for the ranks' check";
  };
  const RunPlan trained = resolve_run(loaded, RunRequest{});
  expect_pieces(trained, "train");
  expect_outputs(trained);
  expect_pieces(resolve_run(loaded, trained.devices, parallel::LaunchInfo{}), "on devices chosen");
  const CollectedRun collected = collect_run(loaded, RunRequest{});
  expect_pieces(collected.plan, "collected");
  expect_outputs(collected.plan);
  RunRequest describe;
  describe.purpose = Purpose::kDescribe;
  expect_pieces(resolve_run(loaded, describe), "describe");
}

TEST(RunPlan, DecodeThreadsGoToSplitsDecodedImageByImage) {
  const gputrain::testing::TempDir dir("plan-decode-threads");
  data::DatasetInfo info;
  info.name = "made";
  info.samples = 6;
  info.input_shape = {3, 8, 8};
  info.classes = 3;
  info.images = true;
  const data::TensorDataset made(info, torch::randint(0, 256, {6, 3, 8, 8}, torch::kUInt8),
                                 torch::arange(6, torch::kInt64).remainder(3));
  for (const data::Split split : {data::Split::kTrain, data::Split::kTest}) {
    data::export_images(made, dir.path(), split, data::ImageFormat::kPng, 100, /*overwrite=*/false);
  }
  const auto folder = [&](const std::vector<std::string>& overrides) {
    return config::load_config_text(fmt::format(R"(
data: {{dataset: image_folder, root: {}, cache: none, batch_size: 2, num_workers: 0, pin_memory: false}}
model: {{name: layers, layers: [flatten, {{type: linear}}]}}
)",
                                                dir.path().string()),
                                    "exp.yaml", overrides);
  };
  const int64_t cpus = device::usable_cpus(device::read_cpu_share(std::chrono::milliseconds(0)));
  const RunPlan decoded = resolve_run(folder({}), RunRequest{});
  EXPECT_EQ(decoded.train_loader.decode_threads, cpus);
  EXPECT_EQ(decoded.test_loader.decode_threads, cpus);
  EXPECT_EQ(resolve_run(folder({"data.decode_threads=3"}), RunRequest{}).train_loader.decode_threads, 3);
  // In memory and the host loader making no per-image change: nothing to decode.
  EXPECT_EQ(
      resolve_run(folder({"data.cache=memory", "data.device_cache=off"}), RunRequest{}).train_loader.decode_threads, 0);
  const RunPlan jittered = resolve_run(
      folder({"data.cache=memory", "data.device_cache=off", "data.augment={color_jitter: {brightness: 0.2}}"}),
      RunRequest{});
  EXPECT_EQ(jittered.train_loader.decode_threads, cpus);
  EXPECT_EQ(resolve_run(run_config(), RunRequest{}).train_loader.decode_threads, 0);  // features
}

// Several GPUs under strategy: auto start one ddp worker each; the process
// that only starts them plans each worker's strategy and reads no data.
TEST(RunPlan, AProcessThatStartsWorkersPlansThemAndReadsNoData) {
  RunRequest request;
  request.inventory = machine(2);
  const RunPlan run = resolve_run(run_config(), request);
  EXPECT_EQ(run.processes.workers, 2);
  EXPECT_EQ(run.launch.world_size, 2);
  ASSERT_EQ(run.worker_strategies.size(), 2U);
  EXPECT_EQ(run.worker_strategies[1].replicas, std::vector<torch::Device>{torch::Device(torch::kCUDA, 1)});
  EXPECT_EQ(run.strategy.replicas, run.worker_strategies[0].replicas);
  EXPECT_FALSE(run.train_set);
  EXPECT_FALSE(run.test_set);
}

// A batch given twice over the processes is refused for the world the workers make.
TEST(RunPlan, TheBatchFormIsCheckedForTheWorkersWorld) {
  RunRequest request;
  request.nproc = 3;
  EXPECT_THROW(resolve_run(run_config({"ddp.backend=gloo", "data.micro_batch_size=8", "data.batch_size=32"}), request),
               ConfigError);
  request.nproc = 4;
  EXPECT_EQ(resolve_run(run_config({"ddp.backend=gloo", "data.micro_batch_size=8", "data.batch_size=32"}), request)
                .launch.world_size,
            4);
}

// `gputrain plan` hears of every problem: a refused GPU list falls back to the
// CPU, a refused train.amp to fp32, and what does not depend on them is still resolved.
TEST(RunPlan, CollectingListsEveryProblemAndResolvesTheRest) {
  const CollectedRun run = collect_run(run_config({"gpus=[4]", "train.amp=fp16"}), RunRequest{});
  ASSERT_EQ(run.problems.size(), 2U) << run.problems.front();
  EXPECT_TRUE(any_contains(run.problems, "gpus")) << run.problems.front();
  EXPECT_TRUE(any_contains(run.problems, "fp16")) << run.problems.back();
  EXPECT_EQ(run.reached, Reached::kComplete);
  EXPECT_EQ(run.plan.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(run.plan.step.amp, config::AmpMode::kOff);
  EXPECT_EQ(run.plan.loaded.config.train.amp, config::AmpMode::kFp16) << "the config stays as written";
  EXPECT_EQ(run.plan.batch.steps_per_epoch, 4);
}

// What test, predict or export resolve for `weights` on this machine's CPU.
RunPlan saved(const config::LoadedConfig& loaded, Purpose purpose, const std::string& weights = "") {
  RunRequest request;
  request.purpose = purpose;
  request.weights = weights;
  return resolve_run(loaded, request);
}

std::string strict_error(const config::LoadedConfig& loaded, const RunRequest& request) {
  try {
    resolve_run(loaded, request);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

// The device and strategy components name only their keys; the plan places
// each at its line, strict or collecting, and a --set at its override.
TEST(RunPlan, DeviceAndStrategyErrorsPointAtTheirKey) {
  const auto loaded = [](const std::string& keys) {
    return config::load_config_text("seed: 3\n" + keys +
                                        "data: {dataset: synthetic, samples: 100, test_samples: 20, features: 8, "
                                        "classes: 3, batch_size: 32, num_workers: 0, pin_memory: false}\n"
                                        "model: {name: mlp, hidden: [16]}\n",
                                    "exp.yaml");
  };
  RunRequest cpu_only;
  cpu_only.inventory = machine(0);
  EXPECT_NE(strict_error(loaded("device: cuda\n"), cpu_only)
                .find("exp.yaml:2:9: device: 'cuda' was requested but CUDA is not available"),
            std::string::npos);
  RunRequest two_gpus;
  two_gpus.inventory = machine(2);
  EXPECT_NE(
      strict_error(loaded("device: cuda\ngpus: [0, 2]\n"), two_gpus).find("exp.yaml:3:7: gpus: GPU 2 is not visible"),
      std::string::npos);
  RunRequest launched;
  launched.launch.world_size = 2;
  EXPECT_NE(strict_error(loaded("strategy: dp\n"), launched)
                .find("exp.yaml:2:11: strategy: 'dp' cannot run as one of 2 launched processes"),
            std::string::npos);
  EXPECT_NE(strict_error(run_config({"device=cuda"}), cpu_only).find("--set #1 (device=cuda): device: 'cuda'"),
            std::string::npos);

  const CollectedRun collected = collect_run(loaded("device: cuda\nstrategy: dp\n"), launched);
  ASSERT_EQ(collected.problems.size(), 2U);
  EXPECT_TRUE(any_contains(collected.problems, "exp.yaml:2:9: device:")) << collected.problems.front();
  EXPECT_TRUE(any_contains(collected.problems, "exp.yaml:3:11: strategy:")) << collected.problems.back();

  try {
    RunRequest testing = cpu_only;
    testing.purpose = Purpose::kEvaluate;
    resolve_run(loaded("device: cuda\n"), testing);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("exp.yaml:2:9: device:"), std::string::npos) << e.what();
  }
}

TEST(RunPlan, CollectingStopsBeforeTheBatchWithoutData) {
  const CollectedRun run =
      collect_run(run_config({"data={dataset: npy, root: /nonexistent/gputrain-data}"}), RunRequest{});
  ASSERT_EQ(run.problems.size(), 1U);
  EXPECT_TRUE(any_contains(run.problems, "/nonexistent/gputrain-data")) << run.problems.front();
  EXPECT_EQ(run.reached, Reached::kStrategy);
  EXPECT_FALSE(run.plan.train_set);
  // The strict resolution throws the same problem.
  EXPECT_THROW(resolve_run(run_config({"data={dataset: npy, root: /nonexistent/gputrain-data}"}), RunRequest{}), Error);
}

// Issue 38: how each step runs is decided once, here, for the model the plan
// traced; train, bench and `gputrain plan` apply or show that decision.
TEST(RunPlan, DecidesHowEachStepRunsForTheModelItTraced) {
  const RunPlan run = resolve_run(run_config({"train.grad_clip=1", "train.on_nan=skip"}), RunRequest{});
  EXPECT_EQ(run.model.parameters, 8 * 16 + 16 + 16 * 3 + 3);
  EXPECT_EQ(run.model.sample_macs, 8 * 16 + 16 * 3);
  EXPECT_FALSE(run.model.convolutional);
  EXPECT_EQ(run.step.grad_clip, 1);
  EXPECT_EQ(run.step.on_nan, config::OnNan::kSkip);
  EXPECT_TRUE(any_contains(run.step.fast.decisions, "optim.fused: on (auto"));
  EXPECT_TRUE(any_contains(run.step.fast.decisions, "train.cuda_graph: off"));
  EXPECT_EQ(run.optim.fused, config::Switch::kOn) << "optim.fused resolved";
  EXPECT_EQ(run.loaded.config.optim.fused, config::Switch::kAuto) << "the config stays as written";
}

// Issue 62 #4: train refuses up front, at data.batch_size's line, a batch
// that would leave a batchnorm layer after a linear one 1 sample to train on,
// rather than stopping at the end of the first epoch; a batchnorm on images
// (many values per channel) trains on one image.
TEST(RunPlan, ABatchOfOneForABatchnormAfterALinearLayerIsRefusedUpFront) {
  const auto net = [](const std::string& layers, const std::vector<std::string>& overrides) {
    return config::load_config_text(
        "seed: 3\ndata: {dataset: synthetic, samples: 64, test_samples: 8, features: 8, "
        "classes: 3, batch_size: 63, num_workers: 0}\nmodel: {layers: " +
            layers + "}\n",
        "exp.yaml", overrides);
  };
  const std::string linear = "[{type: linear, out_features: 8}, batchnorm, relu, linear]";
  try {
    resolve_run(net(linear, {}), RunRequest{});
    ADD_FAILURE() << "a last batch of 1 sample was planned";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.batch_size");
    EXPECT_EQ(e.where().line, 2) << e.what();
    EXPECT_NE(std::string(e.what()).find("leave a last batch of 1 sample"), std::string::npos) << e.what();
  }
  // Shared by 2 dp replicas, a batch of 3 gives one of them 1 sample.
  try {
    resolve_run(net(linear, {"data.batch_size=3", "strategy=dp", "dp.replicas=2"}), RunRequest{});
    ADD_FAILURE() << "a replica's share of 1 sample was planned";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("batches of 3 shared by 2 dp replicas give one of them 1 sample"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(resolve_run(net(linear, {"data.batch_size=32"}), RunRequest{}));
  // Frozen and kept in eval mode (model.freeze_batchnorm: eval), the layer uses its running statistics.
  EXPECT_NO_THROW(resolve_run(net(linear, {"model.freeze=[bn1]"}), RunRequest{}));
}

// A model that cannot be built for the data is a problem of its own, placed
// at its key's line though the model names only the key; the batch is still resolved.
TEST(RunPlan, CollectingListsAModelTheDataCannotFeedAtItsLine) {
  auto images_net = [] {
    return config::load_config_text(R"(
data: {dataset: synthetic, samples: 100, test_samples: 20, features: 8, classes: 3, batch_size: 32, num_workers: 0}
model: {name: cifar10_cnn}
)",
                                    "exp.yaml");
  };
  const CollectedRun run = collect_run(images_net(), RunRequest{});
  ASSERT_EQ(run.problems.size(), 1U);
  EXPECT_TRUE(any_contains(run.problems, "exp.yaml:3:")) << run.problems.front();
  EXPECT_TRUE(any_contains(run.problems, "cifar10_cnn needs image samples")) << run.problems.front();
  EXPECT_EQ(run.reached, Reached::kBatch);
  EXPECT_EQ(run.plan.batch.steps_per_epoch, 4);
  try {
    resolve_run(images_net(), RunRequest{});
    ADD_FAILURE() << "a model the data cannot feed was resolved";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.where().line, 3) << e.what();
  }
}

TEST(RunPlan, ResolvesTheEvaluationKeysForTheTask) {
  const RunPlan run = resolve_run(
      run_config({"train.eval_every=2", "train.early_stopping.patience=3", "train.ema.decay=0.9"}), RunRequest{});
  EXPECT_EQ(run.evaluation.every_epochs, 2);
  EXPECT_EQ(run.evaluation.stop.patience, 3);
  EXPECT_DOUBLE_EQ(run.evaluation.ema.decay, 0.9);
  EXPECT_TRUE(run.evaluation.stop.by_accuracy) << "early stopping's auto metric for classification";

  config::TrainConfig train;
  EXPECT_FALSE(plan_evaluation(train, /*classification=*/false).stop.by_accuracy) << "the loss for regression";
  train.early_stopping.metric = config::StopMetric::kLoss;
  EXPECT_FALSE(plan_evaluation(train, /*classification=*/true).stop.by_accuracy);
}

// Issue 20 #4 and 38 #4: the batch per forward pass makes the batch per
// optimizer step for the run's processes; the config keeps the form.
TEST(BatchForms, AMicroBatchMakesTheBatchPerStepForEachProcessCount) {
  const config::LoadedConfig micro =
      run_config({"data.batch_size=auto", "data.micro_batch_size=16", "train.accumulation_steps=3"});
  ASSERT_FALSE(micro.config.data.batch_size);
  EXPECT_EQ(stated_batch(micro, 1)->global, 48);
  EXPECT_EQ(stated_batch(micro, 4)->global, 192);
  EXPECT_EQ(stated_batch(micro, 4)->accumulation, 3);
  EXPECT_EQ(stated_batch(micro, 4)->test, 192);
  EXPECT_EQ(stated_batch(run_config({"data.test_batch_size=7"}), 1)->test, 7);
  EXPECT_EQ(stated_batch(run_config(), 3)->global, 32) << "data.batch_size is the batch of all processes";
  EXPECT_FALSE(stated_batch(run_config({"data.batch_size=auto", "train.target_batch=64"}), 1)) << "measured";
  // A micro-batch not divided by the accumulation: nothing to divide, the plan multiplies.
  const RunPlan run = resolve_run(
      run_config({"data.batch_size=auto", "data.micro_batch_size=5", "train.accumulation_steps=3"}), RunRequest{});
  EXPECT_EQ(run.batch.global, 15);
  EXPECT_EQ(run.batch.micro, 5);
  EXPECT_EQ(run.train_loader.batch_size, 5);
  EXPECT_EQ(run.test_loader.batch_size, 15);
  EXPECT_FALSE(run.loaded.config.data.batch_size) << "the config stays as written";
}

TEST(BatchForms, BothFormsMustAgreeForTheRunsProcesses) {
  const config::LoadedConfig both =
      run_config({"data.batch_size=96", "data.micro_batch_size=16", "train.accumulation_steps=3"});
  EXPECT_EQ(stated_batch(both, 2)->global, 96);
  try {
    stated_batch(both, 1);
    FAIL() << "96 disagrees with 16 x 3 x 1";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.batch_size");
    EXPECT_EQ(e.where().origin, "--set #1 (data.batch_size=96)");
    EXPECT_NE(std::string(e.what()).find("96 disagrees with data.micro_batch_size: 16 per forward pass x 3 "
                                         "accumulation steps x 1 process make a batch of 48 per optimizer step; "
                                         "set only one of the two"),
              std::string::npos)
        << e.what();
  }
}

// A checkpoint keeps the batch its run resolved: data.batch_size: auto is not
// measured again (a budget of 100 bytes would refuse every micro-batch).
TEST(RunPlan, AResumedRunKeepsItsCheckpointsBatch) {
  RunRequest request;
  request.resolved_batch = checkpoint::ResolvedBatch{24, 2, 6};
  request.resolved_by = "the checkpoint";
  request.resumed_mid_epoch = true;
  const config::LoadedConfig measured =
      run_config({"data.batch_size=auto", "train.target_batch=24", "train.max_memory=100B"});
  const RunPlan run = resolve_run(measured, request);
  EXPECT_FALSE(run.batch_choice);
  EXPECT_EQ(run.batch.sizes(), (checkpoint::ResolvedBatch{24, 2, 6}));
  EXPECT_EQ(run.batch.micro, 12);
  EXPECT_FALSE(run.loaded.config.data.batch_size);
  EXPECT_THROW(resolve_run(measured, RunRequest{}), ConfigError) << "measured afresh, nothing fits 100 bytes";
  // A checkpoint from before 2026-11-28 holds no batch: its config's numbers are the batch.
  request.resolved_batch.reset();
  EXPECT_EQ(resolve_run(run_config({"train.accumulation_steps=2"}), request).batch.micro, 16);
}

// Inside an epoch the resumed run continues the epoch's batches: a
// micro-batch form that comes to another batch for these processes is refused.
TEST(RunPlan, AResumeInsideAnEpochRefusesABatchThatComesOutDifferently) {
  RunRequest request;
  request.resolved_batch = checkpoint::ResolvedBatch{96, 3, 96};  // 16 x 3 x 2 processes
  request.resumed_mid_epoch = true;
  const config::LoadedConfig micro =
      run_config({"data.batch_size=auto", "data.micro_batch_size=16", "train.accumulation_steps=3"});
  try {
    resolve_run(micro, request);
    FAIL() << "one process makes 48";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.batch_size");
    EXPECT_NE(std::string(e.what()).find("comes to 48 per optimizer step (3 accumulation steps) here, but the "
                                         "checkpoint stopped inside an epoch of 96 (3 accumulation steps)"),
              std::string::npos)
        << e.what();
  }
  request.resumed_mid_epoch = false;  // at an epoch's end the batch may change
  EXPECT_EQ(resolve_run(micro, request).batch.global, 48);
}

TEST(SavedWeights, TestingReadsTheTestSplitInTestBatchesAndPredictingOnlyDescribesTraining) {
  const RunPlan testing = saved(run_config({"data.test_batch_size=10"}), Purpose::kEvaluate);
  EXPECT_EQ(testing.devices.primary(), torch::Device("cpu"));
  EXPECT_EQ(testing.test_set->info().samples, 20);
  EXPECT_EQ(testing.test_loader.batch_size, 10);
  const RunPlan predicting = saved(run_config(), Purpose::kPredict);
  EXPECT_EQ(predicting.trained.samples, 100);
  EXPECT_EQ(predicting.test_loader.batch_size, 32);
  EXPECT_EQ(predicting.test_set, nullptr);
  // The stated batch of one process, or data.batch_size: auto's target.
  EXPECT_EQ(saved(run_config({"data.batch_size=auto", "data.micro_batch_size=8", "train.accumulation_steps=2"}),
                  Purpose::kEvaluate)
                .test_loader.batch_size,
            16);
  EXPECT_EQ(
      saved(run_config({"data.batch_size=auto", "train.target_batch=40"}), Purpose::kEvaluate).test_loader.batch_size,
      40);
}

// One rule for the evaluation batch: a training run's test batches are those
// `gputrain test` uses for the same config in one process.
TEST(SavedWeights, TestBatchesAreTheTrainingRunsOnes) {
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{},
        {"data.test_batch_size=10"},
        {"data.batch_size=48"},
        {"data.batch_size=auto", "data.micro_batch_size=8", "train.accumulation_steps=2"}}) {
    EXPECT_EQ(resolve_run(run_config(sets), RunRequest{}).batch.test,
              saved(run_config(sets), Purpose::kEvaluate).test_loader.batch_size)
        << (sets.empty() ? "" : sets.front());
  }
}

// Issue 62 #2: weights that describe their training data need none of it; the
// description agrees with the data it was taken from; older weights (without
// one) still describe the training split from data.root, as before.
TEST(SavedWeights, WeightsThatDescribeTheirTrainingDataNeedNoneOfIt) {
  gputrain::testing::TempDir dir;
  const std::filesystem::path root = dir / "arrays";
  std::filesystem::create_directories(root);
  for (const std::string split : {"train", "test"}) {
    data::write_npy(root / (split + "_inputs.npy"), torch::rand({6, 1, 4, 4}).mul(255).to(torch::kUInt8));
    data::write_npy(root / (split + "_targets.npy"), torch::arange(6, torch::kInt64).remainder(3));
  }
  const config::LoadedConfig loaded =
      config::load_config_text("data: {dataset: npy, root: " + root.string() + ", num_workers: 0}\n", "exp.yaml", {});
  const data::DatasetInfo read = saved(loaded, Purpose::kPredict).trained;  // no weights: the data, as before
  torch::nn::Sequential model(torch::nn::Flatten(), torch::nn::Linear(16, 3));
  const std::string described = (dir / "described.pt").string(), older = (dir / "older.pt").string();
  checkpoint::save_weights(model, described, data::model_description(read));
  checkpoint::save_weights(model, older);

  const RunPlan from_weights = saved(loaded, Purpose::kPredict, described);
  EXPECT_EQ(from_weights.trained_from, "as " + described + " describes it");
  const data::DatasetInfo& stored = from_weights.trained;
  EXPECT_EQ(stored.name, read.name);
  EXPECT_EQ(stored.input_shape, read.input_shape);
  EXPECT_EQ(stored.images, read.images);
  EXPECT_EQ(stored.target_kind, read.target_kind);
  EXPECT_EQ(stored.classes, read.classes);
  EXPECT_EQ(stored.class_names, read.class_names);
  EXPECT_EQ(stored.targets, read.targets);
  EXPECT_EQ(data::description_mismatch(stored, read), "");
  EXPECT_EQ(saved(loaded, Purpose::kPredict, older).trained_from, "from the data set (" + root.string() + ")");

  std::filesystem::remove_all(root);
  EXPECT_EQ(saved(loaded, Purpose::kExport, described).trained.classes, 3);
  EXPECT_THROW(saved(loaded, Purpose::kPredict, older), DataError);
}

TEST(SavedWeights, ADamagedDescriptionIsACheckpointErrorNamingTheFile) {
  data::DatasetInfo info;
  info.name = "npy";
  info.input_shape = {5};
  info.classes = 2;
  const std::string text = data::model_description(info);
  EXPECT_EQ(data::read_model_description(text, "m.pt").input_shape, info.input_shape);
  for (const std::string& damaged :
       {std::string("{"), text.substr(0, text.size() / 2), std::string(R"({"version": 1})"),
        std::string(R"({"version":1,"name":"x","input_shape":[0],"images":false,"target_kind":"classes",)"
                    R"("classes":2,"class_names":[],"targets":0,"columns":[]})"),
        std::string(R"({"version": 7})")}) {
    try {
      (void)data::read_model_description(damaged, "m.pt");
      ADD_FAILURE() << damaged;
    } catch (const CheckpointError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("m.pt: ", 0), 0u) << e.what();
    }
  }
}

TEST(SavedWeights, RefusesWhatTestingCannotUse) {
  EXPECT_THROW(saved(run_config({"train.amp=fp16"}), Purpose::kEvaluate), ConfigError);
  // Test-time augmentation shifts images, and these samples are feature vectors.
  EXPECT_THROW(saved(run_config({"train.tta.translate=2"}), Purpose::kEvaluate), ConfigError);
}

// optim.muon.lr on a model without a trained 4-D convolution weight (this MLP) did nothing, with "no problems".
TEST(RunPlan, MuonOnAModelWithoutATrainedConvolutionWeightIsRefusedAtItsKey) {
  EXPECT_NE(strict_error(run_config({"optim.muon.lr=0.1"}), RunRequest{})
                .find("--set #1 (optim.muon.lr=0.1): optim.muon.lr: Muon trains 4-D convolution weights, and this "
                      "model has none that train"),
            std::string::npos);
}

}  // namespace
}  // namespace gputrain::plan
