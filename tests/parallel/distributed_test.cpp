// ddp on Gloo across real processes: the same update as one process, and
// failures that end every rank with a message naming the culprit, never a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/config/load.h"
#include "gputrain/data/export.h"
#include "gputrain/models/factory.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/evaluate.h"
#include "gputrain/train/trainer.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "support/tolerance.h"

namespace gputrain::parallel {
namespace {

using testing::free_port;
using testing::GputrainProcess;
using testing::PortHolder;
using testing::run_gputrain;
using testing::TempDir;

constexpr int kTestSamples = 20;  // experiment()'s

std::string experiment(int samples, int batch, int epochs, int timeout_s) {
  return fmt::format(R"(
name: ddp
seed: 3
device: cpu
data: {{dataset: synthetic, samples: {}, test_samples: {}, features: 6, classes: 3, batch_size: {},
       num_workers: 0, pin_memory: false}}
model: {{name: mlp, hidden: [12]}}
optim: {{name: sgd, lr: 0.1, momentum: 0.9}}
train: {{epochs: {}, log_every: 1}}
ddp: {{timeout_s: {}}}
)",
                     samples, kTestSamples, batch, epochs, timeout_s);
}

std::map<std::string, std::string> rank_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"OMP_NUM_THREADS", "1"}};  // as torchrun sets it: spinning OpenMP threads of two processes crawl
}

torch::nn::Sequential load_model(const std::filesystem::path& config, const std::filesystem::path& weights,
                                 std::vector<int64_t> input_shape = {6}, int64_t classes = 3) {
  auto model = models::make_model(config::load_config(config.string(), {}).config.model, {input_shape, classes});
  checkpoint::load_weights(model, weights.string());
  return model;
}

// The largest difference between two runs' weights and buffers (batchnorm's running statistics), relative
// to each tensor's largest magnitude (of 1 below it, support/tolerance.h).
double weight_difference(const std::filesystem::path& config, const std::filesystem::path& a,
                         const std::filesystem::path& b) {
  auto p = load_model(config, a)->parameters(), q = load_model(config, b)->parameters();
  const auto pb = load_model(config, a)->buffers(), qb = load_model(config, b)->buffers();
  p.insert(p.end(), pb.begin(), pb.end());
  q.insert(q.end(), qb.begin(), qb.end());
  EXPECT_EQ(p.size(), q.size());
  double most = 0;
  for (std::size_t i = 0; i < p.size() && i < q.size(); ++i) {
    const torch::Tensor expected = q[i].to(torch::kFloat64);
    const double tolerance_unit = testing::relative_tolerance(1, expected.abs().max().item<double>());
    most = std::max(most, (p[i].to(torch::kFloat64) - expected).abs().max().item<double>() / tolerance_unit);
  }
  return most;
}

// Two processes (or one, and ranks of one thread each) sum each gradient in another order, so their weights
// agree to float32's rounding compounded over the steps: relative to each weight, absolute near 0.
void expect_same_weights(const std::filesystem::path& config, const std::filesystem::path& a,
                         const std::filesystem::path& b, int64_t outputs = 3) {
  const auto p = load_model(config, a, {6}, outputs)->parameters();
  const auto q = load_model(config, b, {6}, outputs)->parameters();
  ASSERT_EQ(p.size(), q.size());
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << i;
}

std::size_t lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// The JSON summary line rank 0 prints last.
nlohmann::json summary(const std::string& out) { return nlohmann::json::parse(out.substr(out.rfind('{'))); }

// The test loss of the run that printed `out` is the reference run's, to float32's rounding of its sums in
// another order (support/tolerance.h).
void expect_same_test_loss(const std::string& out, const std::string& reference_out, double relative = 1e-5) {
  const double reference = summary(reference_out)["test_loss"].get<double>();
  EXPECT_NEAR(summary(out)["test_loss"].get<double>(), reference, testing::relative_tolerance(relative, reference));
}

// The accuracies of two runs on experiment()'s test samples agree to one sample: rounding may tip a sample
// whose two largest logits tie to the other class.
void expect_same_test_accuracy(double accuracy, double reference) {
  EXPECT_LE(std::abs(std::lround(accuracy * kTestSamples) - std::lround(reference * kTestSamples)), 1)
      << accuracy << " against " << reference;
}

TEST(Ddp, TwoGlooRanksUnderNprocMatchOneProcess) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two = run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc",
                                 "2", "--set", "train.log_replicas=true"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  // Each rank's share of each batch, as dp logs its replicas'.
  EXPECT_NE(two.err.find("[rank 0] [info] ddp: batch of 8 over 2 ranks: rank 0 rows [0,4) n=4; rank 1 rows [4,8) n=4"),
            std::string::npos)
      << two.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt");
  expect_same_test_loss(two.out, one.out);
  expect_same_test_accuracy(summary(two.out)["test_accuracy"].get<double>(),
                            summary(one.out)["test_accuracy"].get<double>());
  EXPECT_NE(two.err.find("[rank 0] [info] strategy: distributed data-parallel, rank 0 of 2 on cpu (gloo)"),
            std::string::npos)
      << two.err;
  EXPECT_EQ(two.err.find("[rank 1] [info]"), std::string::npos) << "rank 1 logs warnings and errors only";
  // Rank 0 alone wrote the run directory: one metrics file, as many records as the single run's.
  EXPECT_FALSE(std::filesystem::exists(dir / "two/ddp/metrics.1.jsonl"));
  EXPECT_EQ(lines(dir / "two/ddp/metrics.jsonl"), lines(dir / "one/ddp/metrics.jsonl"));
  // Every log interval records each figure's spread over the ranks; the report charts it.
  std::ifstream two_metrics(dir / "two/ddp/metrics.jsonl"), one_metrics(dir / "one/ddp/metrics.jsonl");
  std::string first_two, first_one;
  std::getline(two_metrics, first_two);
  std::getline(one_metrics, first_one);
  const auto ranks = nlohmann::json::parse(first_two)["ranks"];
  EXPECT_EQ(ranks["count"], 2) << first_two;
  EXPECT_GT(ranks["step_s"]["mean"].get<double>(), 0) << first_two;
  EXPECT_LE(ranks["collective_wait_s"]["min"].get<double>(), ranks["collective_wait_s"]["max"].get<double>());
  EXPECT_TRUE(ranks["data_wait_s"].contains("max")) << first_two;
  EXPECT_FALSE(nlohmann::json::parse(first_one).contains("ranks")) << first_one;
  EXPECT_NE(testing::read_text(dir / "two/ddp/report.html").find("Ranks (ddp)"), std::string::npos);
}

// Each rank loads, decodes and augments only its rows of every batch, on host loader threads
// (data.device_cache: false) and from the device cache alike: the images, their order and each row's
// random crop and mirror are those of one process, which the two ranks then train as. 48 images in
// batches of 10 end with a batch of 8.
TEST(Ddp, RanksLoadingOnlyTheirRowsOfAugmentedImagesTrainAsOneProcess) {
  TempDir dir;
  const auto made = run_gputrain(
      {"datasets", "make-cifar", "--out", (dir / "cifar").string(), "--train", "48", "--test", "12", "--seed", "2"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto config = testing::write_text(dir / "ddp.yaml", fmt::format(R"(
name: ddp
seed: 3
device: cpu
data: {{dataset: cifar10, root: {}, batch_size: 10, num_workers: 2, pin_memory: false, shuffle: true,
       normalize: {{mean: [0.5], std: [0.5]}}, augment: {{random_crop: 4, hflip: true}}}}
model: {{name: layers, layers: [flatten, {{type: linear, out_features: 10}}]}}
optim: {{name: sgd, lr: 0.01, momentum: 0.9}}
train: {{epochs: 2, log_every: 1}}
ddp: {{timeout_s: 30}}
)",
                                                                        (dir / "cifar").string()));
  for (const char* cache : {"false", "true"}) {
    SCOPED_TRACE(std::string("data.device_cache=") + cache);
    const std::string set = std::string("data.device_cache=") + cache;
    const auto one =
        run_gputrain({"train", "--config", config.string(), "--output", (dir / "one" / cache).string(), "--set", set});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto two = run_gputrain({"train", "--config", config.string(), "--output", (dir / "two" / cache).string(),
                                   "--nproc", "2", "--set", set});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    const auto p = load_model(config, dir / "one" / cache / "ddp/model.pt", {3, 32, 32}, 10)->parameters();
    const auto q = load_model(config, dir / "two" / cache / "ddp/model.pt", {3, 32, 32}, 10)->parameters();
    ASSERT_EQ(p.size(), q.size());
    for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << i;
    expect_same_test_loss(two.out, one.out);
  }
}

// model.sync_batchnorm: two ranks normalise with their global batch's statistics and train as one
// process does on the whole batch; without it each rank's batchnorm sees its own rows and they drift apart.
// The 36 samples in batches of 8 end with a batch of 4: each rank's share of it differs from the others'.
// c10d's Reducer with accumulation (the first micro-batch of each step only accumulates, as under
// DDP's no_sync), gradients as bucket views and buckets small enough that every tensor has its own:
// still the update of one process on the whole batch.
TEST(Ddp, ReducerWithAccumulationAndBucketViewsMatchesOneProcess) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string(), "--set",
                                 "train.accumulation_steps=2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two = run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc",
                                 "2", "--set", "train.accumulation_steps=2", "--set", "ddp.bucket_cap_mb=0.0001",
                                 "--set", "ddp.gradient_as_bucket_view=true"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("ddp: c10d's Reducer all-reduces 492 B of gradients in 3 buckets during backward"),
            std::string::npos)
      << two.err;
  EXPECT_NE(two.err.find("[rank 0] [info] ddp: Reducer timing"), std::string::npos) << two.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt");
  expect_same_test_loss(two.out, one.out);
}

// model.freeze under ddp: c10d's Reducer holds only the parameters that
// train (one it held would never get its gradient, and the next step would stop).
TEST(Ddp, FrozenLayersOnTwoGlooRanksTrainAsOneProcess) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const auto one = run_gputrain(
      {"train", "--config", config.string(), "--output", (dir / "one").string(), "--set", "model.freeze=[fc1]"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two = run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc",
                                 "2", "--set", "model.freeze=[fc1]"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  // fc2 alone: 3 x 12 weights and 3 biases.
  EXPECT_NE(two.err.find("ddp: c10d's Reducer all-reduces 156 B of gradients"), std::string::npos) << two.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt");
}

TEST(Ddp, SyncBatchnormOnTwoGlooRanksTrainsAsOneProcess) {
  TempDir dir;
  std::string text = experiment(36, 8, 2, 30);
  text.replace(text.find("model: {name: mlp, hidden: [12]}"), std::string("model: {name: mlp, hidden: [12]}").size(),
               "model: {name: layers, sync_batchnorm: true, layers: [{type: linear, out_features: 12}, batchnorm, "
               "relu, linear]}");
  const auto config = testing::write_text(dir / "ddp.yaml", text);
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.err.find("model.sync_batchnorm: one process"), std::string::npos) << one.err;
  const auto two =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("model.sync_batchnorm: 1 batchnorm layer normalise"), std::string::npos) << two.err;
  EXPECT_LT(weight_difference(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt"), 1e-5);
  expect_same_test_loss(two.out, one.out, 1e-4);

  const auto apart = run_gputrain({"train", "--config", config.string(), "--output", (dir / "apart").string(),
                                   "--nproc", "2", "--set", "model.sync_batchnorm=false"});
  ASSERT_EQ(apart.exit_code, 0) << apart.err;
  EXPECT_GT(weight_difference(config, dir / "one/ddp/model.pt", dir / "apart/ddp/model.pt"), 1e-2);

  const auto dp = run_gputrain({"train", "--config", config.string(), "--output", (dir / "dp").string(), "--set",
                                "strategy=dp", "--set", "dp.replicas=2"});
  EXPECT_EQ(dp.exit_code, 2);
  EXPECT_NE(dp.err.find("model.sync_batchnorm: works under ddp, not dp"), std::string::npos) << dp.err;
}

// Without model.sync_batchnorm each rank's batchnorm running statistics follow its own rows. Before
// each evaluation and checkpoint every rank takes rank 0's, so the test figures reported are those of
// the one model the run saves: evaluating model.pt gives them again.
TEST(Ddp, RanksEvaluateWithRankZerosBatchnormStatisticsTheModelSaved) {
  TempDir dir;
  std::string text = experiment(36, 8, 2, 30);
  text.replace(text.find("model: {name: mlp, hidden: [12]}"), std::string("model: {name: mlp, hidden: [12]}").size(),
               "model: {name: layers, layers: [{type: linear, out_features: 12}, batchnorm, relu, linear]}");
  const auto config = testing::write_text(dir / "ddp.yaml", text);
  const auto two =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  plan::RunRequest evaluating;
  evaluating.purpose = plan::Purpose::kEvaluate;
  const step::EvalResult saved = train::evaluate_saved_weights(
      plan::resolve_run(config::load_config(config.string(), {}), evaluating), (dir / "two/ddp/model.pt").string());
  // Rank 0's process, on one thread, against this one (support/tolerance.h).
  EXPECT_NEAR(summary(two.out)["test_loss"].get<double>(), saved.mean_loss(),
              testing::relative_tolerance(1e-5, saved.mean_loss()));
  expect_same_test_accuracy(summary(two.out)["test_accuracy"].get<double>(), saved.accuracy());
}

// Batches of 5 split 3 + 2, and the last batch of 1 leaves rank 1 no rows.
TEST(Ddp, UnevenSplitUnderTorchrunVariablesMatchesOneProcess) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(21, 5, 2, 30));
  const std::vector<std::string> args{"train", "--config", config.string(), "--output", (dir / "two").string()};
  const int port = free_port();
  GputrainProcess rank0(args, rank_env(0, 2, port));
  GputrainProcess rank1(args, rank_env(1, 2, port));
  const auto r1 = rank1.wait();
  const auto r0 = rank0.wait();
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_TRUE(r1.out.empty()) << r1.out;
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt");
}

// data.batch_size: auto under --nproc: the launcher chooses once and every worker runs its choice.
TEST(Ddp, AutoBatchUnderNprocIsChosenOnceAndTrainsLikeTheBatchSetByHand) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const auto two =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc", "2", "--set",
                    "data.batch_size=auto", "--set", "train.target_batch=8", "--set", "train.max_memory=1GiB"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("data.batch_size: 8 (auto: micro-batch 4 x 1 accumulation step = 8 per optimizer step over "
                         "2 processes"),
            std::string::npos)
      << two.err;
  // The workers take it from the launcher, not from a --set: their configs stay as written.
  EXPECT_NE(two.err.find("data.batch_size: 8 in 1 accumulation step (auto, as the launcher resolved it)"),
            std::string::npos)
      << two.err;
  EXPECT_NE(testing::read_text(dir / "two/ddp/config.yaml").find("batch_size: 8"), std::string::npos);
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt");
}

// Under torchrun each rank resolves its own config: ranks whose batches differ
// (a rank's --set, or auto measuring different devices) would step apart.
TEST(Ddp, RanksRunningDifferentBatchesStopNamingTheirOwn) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 1, 30));
  const std::vector<std::string> args{"train", "--config", config.string(), "--output", (dir / "run").string(),
                                      "--set"};
  const int port = free_port();
  auto with = [&](const char* batch) {
    std::vector<std::string> out = args;
    out.push_back(batch);
    return out;
  };
  GputrainProcess rank0(with("data.batch_size=8"), rank_env(0, 2, port));
  GputrainProcess rank1(with("data.batch_size=4"), rank_env(1, 2, port));
  const auto r1 = rank1.wait();
  const auto r0 = rank0.wait();
  EXPECT_EQ(r0.exit_code, 2) << r0.err;
  EXPECT_EQ(r1.exit_code, 2) << r1.err;
  EXPECT_NE(r0.err.find("the ranks run different batches; rank 0 has data.batch_size 8"), std::string::npos) << r0.err;
  EXPECT_NE(r1.err.find("rank 1 has data.batch_size 4"), std::string::npos) << r1.err;
}

// torchrun's agent hosts the store itself (TORCHELASTIC_USE_AGENT_STORE).
TEST(Ddp, RunsUnderTorchrun) {
  if (std::string(testing::kTorchrun).empty()) GTEST_SKIP() << "no torchrun beside the torch wheel";
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 1, 30));
  GputrainProcess torchrun(
      {"--nproc-per-node=2", "--master-port=" + std::to_string(free_port()), "--no-python", testing::kGputrainBinary,
       "train", "--config", config.string(), "--output", dir.path().string()},
      {}, testing::kSourceDir, {}, testing::kTorchrun);
  const auto result = torchrun.wait();
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("[rank 0] [info] strategy: distributed data-parallel, rank 0 of 2"), std::string::npos)
      << result.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "ddp/model.pt"));
}

// Waits for `launched` (a 4-rank job writing dir/four) and checks that its weights are those of one
// process on the whole batch (written to dir/one).
void expect_four_ranks_train_as_one(std::vector<std::unique_ptr<GputrainProcess>>& launched,
                                    const std::filesystem::path& config, const TempDir& dir) {
  std::string logs;
  for (auto& process : launched) {
    const auto result = process->wait();
    EXPECT_EQ(result.exit_code, 0) << result.err;
    logs += result.err;
  }
  EXPECT_NE(logs.find("[rank 0] [info] strategy: distributed data-parallel, rank 0 of 4"), std::string::npos) << logs;
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "four/ddp/model.pt");
}

// Two machines, proven on one: two torchrun agents (nodes) of 2 workers each meet at one c10d
// rendezvous and make a single 4-rank job, which trains as one process on the whole batch.
TEST(Ddp, TwoTorchrunNodesMakeOneFourRankJob) {
  if (std::string(testing::kTorchrun).empty()) GTEST_SKIP() << "no torchrun beside the torch wheel";
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  std::vector<std::unique_ptr<GputrainProcess>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<GputrainProcess>(
        std::vector<std::string>{"--nnodes=2", "--node-rank=" + std::to_string(node), "--nproc-per-node=2",
                                 "--rdzv-backend=c10d", "--rdzv-endpoint=" + endpoint, "--rdzv-id=two-nodes",
                                 "--no-python", testing::kGputrainBinary, "train", "--config", config.string(),
                                 "--output", (dir / "four").string()},
        std::map<std::string, std::string>{}, testing::kSourceDir, testing::ChildSetup{}, testing::kTorchrun));
  }
  expect_four_ranks_train_as_one(nodes, config, dir);
}

// srun's variables alone (no torchrun): SLURM_PROCID is the rank, SLURM_LOCALID the local rank,
// SLURM_NTASKS the world size; MASTER_ADDR and MASTER_PORT come from the job script.
TEST(Ddp, SlurmTasksOfTwoNodesTrainAsOneProcess) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 2, 30));
  const int port = free_port();
  std::vector<std::unique_ptr<GputrainProcess>> tasks;
  for (int task = 0; task < 4; ++task) {
    const std::map<std::string, std::string> env{{"SLURM_PROCID", std::to_string(task)},
                                                 {"SLURM_LOCALID", std::to_string(task % 2)},
                                                 {"SLURM_NODEID", std::to_string(task / 2)},
                                                 {"SLURM_NTASKS", "4"},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(port)},
                                                 {"OMP_NUM_THREADS", "1"}};
    tasks.push_back(std::make_unique<GputrainProcess>(
        std::vector<std::string>{"train", "--config", config.string(), "--output", (dir / "four").string()}, env));
  }
  expect_four_ranks_train_as_one(tasks, config, dir);
}

// Starts `--nproc 2` on a long run; returns rank 1's pid once rank 0 has finished an epoch.
pid_t second_rank_mid_run(GputrainProcess& launcher) {
  const std::regex pid_line(R"(rank 1 runs as pid (\d+))");
  std::smatch match;
  std::string err;
  const auto started = std::chrono::steady_clock::now();
  while (!(std::regex_search(err, match, pid_line) && err.find("Epoch 1/") != std::string::npos)) {
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(60) ||
        launcher.wait_for(std::chrono::milliseconds(50))) {
      ADD_FAILURE() << err;
      return -1;
    }
    err = launcher.err_so_far();
  }
  return std::stoi(match[1]);
}

// The pid of the process whose command line holds `marker` and whose environment sets RANK=`rank`; -1 if none.
pid_t rank_process(const std::string& marker, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string command = testing::read_text(entry.path() / "cmdline"),
                environment = testing::read_text(entry.path() / "environ");
    std::replace(command.begin(), command.end(), '\0', ' ');
    if (command.find(marker) == std::string::npos || command.find("torchrun") != std::string::npos) continue;
    if (("\0" + environment).find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos) {
      return std::stoi(name);
    }
  }
  return -1;
}

TEST(Ddp, KilledRankEndsTheOthersNamingIt) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 100000, 5));
  GputrainProcess launcher({"train", "--config", config.string(), "--output", (dir / "run").string(), "--nproc", "2"});
  const pid_t rank1 = second_rank_mid_run(launcher);  // the kill lands mid-run
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  const auto result = launcher.wait_for(std::chrono::seconds(30));
  ASSERT_TRUE(result) << "still running 30 s after rank 1 was killed";
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(10));
  EXPECT_EQ(result->exit_code, 1) << result->err;
  EXPECT_TRUE(std::regex_search(result->err, std::regex(R"(\[rank 0\] \[error\] rank 0: .* failed: rank 1 )")))
      << result->err;
  EXPECT_NE(result->err.find("launcher: rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"),
            std::string::npos)
      << result->err;
}

// The same under torchrun: rank 0 names the stopped rank and exits; torchrun's agent then ends the
// group (it sends SIGTERM, and SIGKILL 30 s later to the stopped rank), leaving no process behind.
TEST(Ddp, StoppedRankUnderTorchrunEndsTheJob) {
  if (std::string(testing::kTorchrun).empty()) GTEST_SKIP() << "no torchrun beside the torch wheel";
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 100000, 5));
  GputrainProcess torchrun(
      {"--nproc-per-node=2", "--master-port=" + std::to_string(free_port()), "--no-python", testing::kGputrainBinary,
       "train", "--config", config.string(), "--output", dir.path().string()},
      {}, testing::kSourceDir, {}, testing::kTorchrun);
  pid_t rank1 = -1;
  const auto started = std::chrono::steady_clock::now();
  while (torchrun.err_so_far().find("Epoch 1/") == std::string::npos || rank1 < 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60)) << torchrun.err_so_far();
    ASSERT_FALSE(torchrun.wait_for(std::chrono::milliseconds(50))) << torchrun.err_so_far();
    rank1 = rank_process(config.string(), 1);
  }
  ASSERT_EQ(kill(rank1, SIGSTOP), 0);
  const auto result = torchrun.wait_for(std::chrono::seconds(90));
  if (!result) kill(rank1, SIGKILL);
  ASSERT_TRUE(result) << "still running 90 s after rank 1 was stopped";
  EXPECT_NE(result->exit_code, 0);
  EXPECT_TRUE(std::regex_search(
      result->err, std::regex(R"(\[rank 0\] \[error\] rank 0: [^:]+ failed: rank 1 did not answer within 2 s)")))
      << result->err;
  EXPECT_NE(kill(rank1, 0), 0) << "rank 1 was left behind";
}

// A rank that hangs (stopped, as a debugger or a stuck host would leave it)
// ends the job within ddp.timeout_s + 5 s at every phase of a run, named by
// the rank that gave up on it; the launcher continues and terminates a stopped
// worker at once and leaves no process behind. Each case waits for a line that
// marks its phase, stops a rank (`stop_when` returns its pid, -1 to keep
// waiting) and times the job's end from the stop.
constexpr int kHangTimeoutS = 3;  // ddp.timeout_s of these runs

struct StoppedRankCase {
  std::string config;  // the experiment
  std::string binary = testing::kGputrainBinary;
  std::function<pid_t(const std::string& err_so_far)> stop_when;
  std::string named;  // what the first failing rank's error says of the stopped one (a regex)
  std::vector<std::string> more_args = {};
};

pid_t pid_of_rank(const std::string& err, int rank) {
  std::smatch match;
  if (!std::regex_search(err, match, std::regex(fmt::format(R"(rank {} runs as pid (\d+))", rank)))) return -1;
  return std::stoi(match[1]);
}

pid_t rank_once(const std::string& err, int rank, const std::string& marker) {
  return err.find(marker) == std::string::npos ? -1 : pid_of_rank(err, rank);
}

void expect_stopped_rank_ends_the_job(const StoppedRankCase& c, const std::filesystem::path& dir) {
  const auto config = testing::write_text(dir / "ddp.yaml", c.config);
  std::vector<std::string> args{"train",   "--config", config.string(), "--output", (dir / "run").string(),
                                "--nproc", "2"};
  args.insert(args.end(), c.more_args.begin(), c.more_args.end());
  GputrainProcess launcher(args, {}, testing::kSourceDir, {}, c.binary);
  pid_t stopped = -1;
  const auto started = std::chrono::steady_clock::now();
  while ((stopped = c.stop_when(launcher.err_so_far())) < 0) {
    ASSERT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(90)) << launcher.err_so_far();
    ASSERT_FALSE(launcher.wait_for(std::chrono::milliseconds(5))) << launcher.err_so_far();
  }
  ASSERT_EQ(kill(stopped, SIGSTOP), 0);
  const auto stop = std::chrono::steady_clock::now();
  const auto result = launcher.wait_for(std::chrono::seconds(60));
  const auto ended = std::chrono::steady_clock::now();
  if (!result) kill(stopped, SIGKILL);
  ASSERT_TRUE(result) << "still running 60 s after pid " << stopped << " was stopped";
  const double took_s = std::chrono::duration<double>(ended - stop).count();
  std::cout << "the job ended " << took_s << " s after the stop (ddp.timeout_s " << kHangTimeoutS << ")\n";
  EXPECT_LE(took_s, kHangTimeoutS + 5) << result->err;
  EXPECT_EQ(result->exit_code, 1) << result->err;
  EXPECT_TRUE(std::regex_search(result->err, std::regex(c.named))) << result->err;
  EXPECT_NE(result->err.find(fmt::format("(pid {}) is stopped", stopped)), std::string::npos) << result->err;
  EXPECT_NE(kill(stopped, 0), 0) << "the stopped rank was left behind";
}

std::string long_run(const std::string& extra = "") { return experiment(64, 8, 100000, kHangTimeoutS) + extra; }

const char* const kRank1NotAnswering = R"(\[rank 0\] \[error\] rank 0: [^:]+ failed: rank 1 did not answer within 2 s)";

TEST(Ddp, RankStoppedWhileLoadingEndsTheJobWithinTheTimeout) {
  TempDir dir;
  expect_stopped_rank_ends_the_job(
      {long_run(), testing::kGputrainBinary, [](const std::string& err) { return pid_of_rank(err, 1); },
       R"(rank 0: rendezvous at [0-9.:]+ timed out after 3 s \(ddp.timeout_s\): rank 1 did not join)"},
      dir.path());
}

TEST(Ddp, RankStoppedAtItsFirstStepEndsTheJobWithinTheTimeout) {
  TempDir dir;
  // Rank 0 logs "joined" once every rank has: the weights' broadcast and the first steps follow.
  expect_stopped_rank_ends_the_job(
      {long_run(), testing::kGputrainBinary,
       [](const std::string& err) { return rank_once(err, 1, "ddp: rank 0 of 2 joined"); }, kRank1NotAnswering},
      dir.path());
}

TEST(Ddp, RankStoppedMidEpochEndsTheJobWithinTheTimeout) {
  TempDir dir;
  expect_stopped_rank_ends_the_job(
      {long_run(), testing::kGputrainBinary, [](const std::string& err) { return rank_once(err, 1, "Epoch 1/"); },
       kRank1NotAnswering},
      dir.path());
}

TEST(Ddp, RankStoppedDuringEvaluationEndsTheJobWithinTheTimeout) {
  TempDir dir;
  // Two steps an epoch, then seconds of evaluation on a large test split: rank 0's
  // "Epoch 1/" line comes as both ranks start evaluating.
  std::string config = long_run();
  config = std::regex_replace(config, std::regex("test_samples: 20"), "test_samples: 60000");
  config = std::regex_replace(config, std::regex(R"(hidden: \[12\])"), "hidden: [512, 512]");
  expect_stopped_rank_ends_the_job(
      {config, testing::kGputrainBinary, [](const std::string& err) { return rank_once(err, 1, "Epoch 1/"); },
       kRank1NotAnswering},
      dir.path());
}

TEST(Ddp, RankZeroStoppedWritingACheckpointEndsTheJobAndKeepsTheCheckpointsUsable) {
  TempDir dir;
  const std::string config = experiment(64, 8, 2, kHangTimeoutS) + "checkpoint: {every: 1}\n";
  const auto first = run_gputrain({"train", "--config", testing::write_text(dir / "ddp.yaml", config).string(),
                                   "--output", (dir / "run").string(), "--nproc", "2"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto written = [&] {
    std::map<std::string, std::uintmax_t> sizes;
    for (const auto& entry : std::filesystem::directory_iterator(dir / "run/ddp/checkpoints")) {
      sizes[entry.path().filename().string()] = entry.file_size();
    }
    return sizes;
  };
  const auto before = written();
  ASSERT_FALSE(before.empty());
  // Resumed for longer, every checkpoint write pausing half-way (paused_writes_main.cpp): rank 0,
  // which alone writes them, is stopped in the middle of its first.
  expect_stopped_rank_ends_the_job(
      {config,
       testing::kPausedWritesBinary,
       [](const std::string& err) { return rank_once(err, 0, "test hook: pausing"); },
       R"(\[rank 1\] \[error\] rank 1: [^:]+ failed: rank 0 is gone: the rendezvous store of rank 0 at [0-9.:]+ stopped answering)",
       {"--resume", "auto", "--set", "train.epochs=100000"}},
      dir.path());
  // The checkpoints written before are as they were, and each still loads.
  std::map<std::string, std::uintmax_t> complete;
  for (const auto& [name, size] : written()) {
    if (name.front() != '.') complete[name] = size;  // the write cut short left its hidden temporary file
  }
  EXPECT_EQ(complete, before);
  for (const auto& [name, size] : complete) {
    if (std::filesystem::path(name).extension() != ".ckpt") continue;
    const auto tested = run_gputrain({"test", "--checkpoint", (dir / "run/ddp/checkpoints" / name).string()});
    EXPECT_EQ(tested.exit_code, 0) << name << ": " << tested.err;
  }
}

// One SIGINT to the launcher reaches both ranks; they stop at the same step,
// rank 0 writes one checkpoint, and --resume auto under --nproc finishes the
// run with the weights of a run that was never stopped.
TEST(Ddp, SigintToTheLauncherCheckpointsOnceAndResumes) {
  TempDir dir;
  const auto config = testing::write_text(
      dir / "ddp.yaml", experiment(64, 8, 200, 30) + "checkpoint: {every: 0, every_steps: 1000000}\n");
  const std::vector<std::string> train{"train",   "--config", config.string(), "--output", (dir / "run").string(),
                                       "--nproc", "2"};
  GputrainProcess launcher(train);
  ASSERT_TRUE(testing::wait_until([&] { return launcher.err_so_far().find("Epoch 1/") != std::string::npos; }))
      << launcher.err_so_far();
  launcher.send(SIGINT);
  const auto stopped = launcher.wait();
  ASSERT_EQ(stopped.exit_code, 130) << stopped.err;
  const auto checkpoints = dir / "run/ddp/checkpoints";
  std::size_t written = 0;
  for (const auto& entry : std::filesystem::directory_iterator(checkpoints))
    written += entry.path().extension() == ".ckpt";
  EXPECT_EQ(written, 1u) << "rank 0 alone writes, once";

  std::vector<std::string> resume = train;
  resume.insert(resume.end(), {"--resume", "auto"});
  const auto resumed = run_gputrain(resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto whole =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "whole").string(), "--nproc", "2"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  expect_same_weights(config, dir / "run/ddp/model.pt", dir / "whole/ddp/model.pt");
}

// train.on_nan under ddp, on the device without a sync a step: an inf loss in
// a sample of rank 1's rows (sample 13: step 2, row 5 of 8; a regression
// target of 3e38, whose squared error overflows float32) makes both ranks
// skip that step, so `skip` trains to one process's weights and `stop` ends
// both ranks at the same check, naming the step.
TEST(Ddp, ANonFiniteLossOnOneRankIsSkippedOrStoppedOnEvery) {
  TempDir dir;
  torch::manual_seed(3);
  torch::Tensor targets = torch::randn({64});
  targets[13] = 3e38F;
  data::write_npy(dir / "train_inputs.npy", torch::randn({64, 6}));
  data::write_npy(dir / "train_targets.npy", targets);
  data::write_npy(dir / "test_inputs.npy", torch::randn({16, 6}));
  data::write_npy(dir / "test_targets.npy", torch::randn({16}));
  const auto config = testing::write_text(dir / "ddp.yaml", fmt::format(R"(
name: ddp
seed: 2
device: cpu
data: {{dataset: npy, root: {}, batch_size: 8, shuffle: false, num_workers: 0, pin_memory: false}}
model: {{name: mlp, hidden: [12]}}
optim: {{name: sgd, lr: 0.05, momentum: 0.9}}
train: {{epochs: 2, log_every: 4, on_nan: skip}}
ddp: {{timeout_s: 30}}
)",
                                                                        (dir / "").string()));
  const auto one = run_gputrain({"train", "--config", config.string(), "--output", (dir / "one").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "two").string(), "--nproc", "2"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("epoch 1, step 2: the loss is not finite; 1 step skipped"), std::string::npos) << two.err;
  expect_same_weights(config, dir / "one/ddp/model.pt", dir / "two/ddp/model.pt", /*outputs=*/1);
  EXPECT_NE(two.err.find("epoch 2, step 10: the loss is not finite; 1 step skipped"), std::string::npos) << two.err;

  const auto stopped = run_gputrain({"train", "--config", config.string(), "--output", (dir / "stop").string(),
                                     "--nproc", "2", "--set", "train.on_nan=stop"});
  EXPECT_EQ(stopped.exit_code, 1) << stopped.err;
  const std::string stop_message = "epoch 1, step 2: the loss is not finite (inf or NaN)";
  const std::size_t first = stopped.err.find(stop_message);
  ASSERT_NE(first, std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find(stop_message, first + 1), std::string::npos) << "each rank stops there\n" << stopped.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "stop/ddp/model.pt"));
}

std::size_t checkpoint_files(const std::filesystem::path& dir) {
  std::size_t n = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) n += entry.path().extension() == ".ckpt";
  return n;
}

// Slurm's preemption notice (SIGUSR1, passed on by the launcher as srun passes it on): both ranks
// finish the step and checkpoint even under train.on_sigint: stop, and every process exits with 75.
// The requeued job (SLURM_RESTART_COUNT=1, no --resume) continues from that checkpoint and ends
// with the weights of a run that was never preempted.
TEST(Ddp, PreemptionNoticeCheckpointsExits75AndTheRequeuedJobResumes) {
  TempDir dir;
  const auto config = testing::write_text(
      dir / "ddp.yaml", experiment(64, 8, 200, 30) + "checkpoint: {every: 0, every_steps: 1000000}\n");
  const std::vector<std::string> train{
      "train", "--config", config.string(),       "--output", (dir / "run").string(), "--nproc",
      "2",     "--set",    "train.on_sigint=stop"};
  GputrainProcess launcher(train);
  ASSERT_TRUE(testing::wait_until([&] { return launcher.err_so_far().find("Epoch 1/") != std::string::npos; }))
      << launcher.err_so_far();
  launcher.send(SIGUSR1);
  const auto preempted = launcher.wait();
  ASSERT_EQ(preempted.exit_code, 75) << preempted.err;
  EXPECT_TRUE(summary(preempted.out)["preempted"].get<bool>()) << preempted.out;
  EXPECT_NE(preempted.err.find("preemption notice: step"), std::string::npos) << preempted.err;
  EXPECT_NE(preempted.err.find("exit code 75 asks for a requeue"), std::string::npos) << preempted.err;
  EXPECT_EQ(checkpoint_files(dir / "run/ddp/checkpoints"), 1u);

  const auto requeued = run_gputrain(train, {{"SLURM_RESTART_COUNT", "1"}});
  ASSERT_EQ(requeued.exit_code, 0) << requeued.err;
  EXPECT_NE(requeued.err.find("this Slurm job was requeued (SLURM_RESTART_COUNT=1)"), std::string::npos)
      << requeued.err;
  EXPECT_NE(requeued.err.find("[rank 0] [info] resuming from"), std::string::npos) << requeued.err;
  const auto whole =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "whole").string(), "--nproc", "2"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  expect_same_weights(config, dir / "run/ddp/model.pt", dir / "whole/ddp/model.pt");
}

// An elastic job loses rank 1 (SIGKILL) after rank 0's first checkpoint; `launch` restarts every
// worker, which continue from the newest checkpoint (train.resume: auto under
// TORCHELASTIC_RESTART_COUNT=1, no --resume) and end with the weights of a run never interrupted.
void expect_restart_resumes_to_the_uninterrupted_weights(
    const std::function<std::unique_ptr<GputrainProcess>(const std::filesystem::path& config,
                                                         const std::filesystem::path& out)>& launch) {
  TempDir dir;
  const auto config =
      testing::write_text(dir / "ddp.yaml", experiment(64, 8, 200, 5) + "checkpoint: {every: 0, every_steps: 16}\n");
  const auto job = launch(config, dir / "run");
  pid_t rank1 = -1;
  ASSERT_TRUE(testing::wait_until([&] {
    if (checkpoint_files(dir / "run/ddp/checkpoints") == 0) return false;
    rank1 = rank_process(config.string(), 1);
    return rank1 > 0;
  })) << job->err_so_far();
  ASSERT_EQ(kill(rank1, SIGKILL), 0);
  const auto result = job->wait_for(std::chrono::seconds(120));
  ASSERT_TRUE(result) << "still running 120 s after rank 1 was killed";
  EXPECT_EQ(result->exit_code, 0) << result->err;
  EXPECT_NE(result->err.find("this is restart 1 of an elastic job (TORCHELASTIC_RESTART_COUNT=1)"), std::string::npos)
      << result->err;
  EXPECT_NE(result->err.find("[rank 0] [info] resuming from"), std::string::npos) << result->err;
  const auto whole =
      run_gputrain({"train", "--config", config.string(), "--output", (dir / "whole").string(), "--nproc", "2"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  expect_same_weights(config, dir / "run/ddp/model.pt", dir / "whole/ddp/model.pt");
}

TEST(Ddp, KilledRankUnderNprocMaxRestartsResumesToTheUninterruptedWeights) {
  expect_restart_resumes_to_the_uninterrupted_weights([](const auto& config, const auto& out) {
    return std::make_unique<GputrainProcess>(std::vector<std::string>{
        "train", "--config", config.string(), "--output", out.string(), "--nproc", "2", "--max-restarts", "1"});
  });
}

TEST(Ddp, KilledRankUnderTorchrunMaxRestartsResumesToTheUninterruptedWeights) {
  if (std::string(testing::kTorchrun).empty()) GTEST_SKIP() << "no torchrun beside the torch wheel";
  expect_restart_resumes_to_the_uninterrupted_weights([](const auto& config, const auto& out) {
    return std::make_unique<GputrainProcess>(
        std::vector<std::string>{
            "--nproc-per-node=2", "--max-restarts=1", "--master-port=" + std::to_string(free_port()), "--no-python",
            testing::kGputrainBinary, "train", "--config", config.string(), "--output", out.string()},
        std::map<std::string, std::string>{}, testing::kSourceDir, testing::ChildSetup{}, testing::kTorchrun);
  });
}

TEST(Ddp, BadLaunchVariablesExitTwo) {
  const std::vector<std::string> args{"train", "--config", "configs/seed_mlp.yaml", "--set", "device=cpu"};
  const auto rank_too_big = run_gputrain(args, {{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(rank_too_big.exit_code, 2);
  EXPECT_NE(rank_too_big.err.find("RANK=2 with WORLD_SIZE=2: ranks run from 0 to WORLD_SIZE-1"), std::string::npos)
      << rank_too_big.err;
  const auto not_a_number = run_gputrain(args, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "two"}});
  EXPECT_EQ(not_a_number.exit_code, 2);
  EXPECT_NE(not_a_number.err.find("SLURM_NTASKS='two' is not an integer"), std::string::npos) << not_a_number.err;
  const auto half = run_gputrain(args, {{"WORLD_SIZE", "2"}});
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_NE(half.err.find("WORLD_SIZE is set but RANK is not"), std::string::npos) << half.err;
}

TEST(Ddp, PortInUseAndMissingRankAreClearErrors) {
  TempDir dir;
  const auto config = testing::write_text(dir / "ddp.yaml", experiment(64, 8, 1, 1));
  const std::vector<std::string> args{"train", "--config", config.string(), "--output", (dir / "run").string()};
  PortHolder busy;
  ASSERT_EQ(listen(busy.fd, 1), 0);
  const auto in_use = run_gputrain(args, rank_env(0, 2, busy.port));
  EXPECT_EQ(in_use.exit_code, 1);
  EXPECT_NE(in_use.err.find(fmt::format("cannot host the rendezvous store on port {}", busy.port)), std::string::npos)
      << in_use.err;

  const auto alone = run_gputrain(args, rank_env(0, 2, free_port()));
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_NE(alone.err.find("timed out after 1 s (ddp.timeout_s): rank 1 did not join"), std::string::npos) << alone.err;
}

// Two ranks on threads of this process: every hook against its expected result.
TEST(DistributedStrategy, TwoRanksOnThreadsShareBatchesAndSums) {
  StrategyPlan plan{StrategyKind::kDistributed, {torch::Device(torch::kCPU)}, "test", config::DdpBackend::kGloo};
  plan.timeout_s = 20;
  const int port = free_port();
  std::vector<std::exception_ptr> errors(2);
  auto rank = [&](int r) {
    try {
      const auto strategy = make_strategy(plan, {r, r, 2, "127.0.0.1", port});
      EXPECT_EQ(strategy->is_primary(), r == 0);
      EXPECT_TRUE(strategy->any_rank(r == 1));
      EXPECT_FALSE(strategy->any_rank(false));
      // One collective for a step's three questions: each flag raised on one rank reaches both.
      const StepFlags agreed =
          strategy->agree({r == 0, false, false}, torch::tensor(r == 1 ? INFINITY : 2.5, torch::kFloat32));
      EXPECT_TRUE(agreed.stop);
      EXPECT_FALSE(agreed.checkpoint);
      EXPECT_TRUE(agreed.non_finite);
      // Without a loss to read, nothing waits: a step's flags come back at the next step, on both ranks.
      const StepFlags queued = strategy->agree({false, r == 1, false}, {});
      EXPECT_FALSE(queued.stop || queued.checkpoint || queued.non_finite || queued.preempt) << "nothing queued before";
      const StepFlags next = strategy->agree({false, false, false, r == 0}, {});
      EXPECT_FALSE(next.stop);
      EXPECT_TRUE(next.checkpoint) << "rank 1's request of the step before";
      EXPECT_FALSE(next.preempt) << "this step's: read at the next";
      // A step that reads its loss also returns what was still queued.
      const StepFlags now = strategy->agree({}, torch::tensor(1.0F));
      EXPECT_TRUE(now.preempt);
      EXPECT_FALSE(now.checkpoint || now.non_finite);
      EXPECT_FALSE(strategy->agree({}, torch::tensor(1.0F)).preempt) << "read once";
      // train.on_nan's device flag: one rank's non-finite loss skips the step on both.
      torch::Tensor found = torch::tensor(r == 1 ? 1.0F : 0.0F);
      strategy->max_across_processes(found);
      EXPECT_EQ(found.item<float>(), 1.0F);
      torch::Tensor sums = torch::full({2}, r + 1.0, torch::kFloat64);
      strategy->all_reduce_sum(sums);
      EXPECT_TRUE(sums.equal(torch::full({2}, 3.0, torch::kFloat64)));

      // Each rank loads its own rows of every batch: 5 split 3 + 2, and a batch of 1 leaves rank 1 none.
      const data::Shard shard = strategy->loader_shard();
      EXPECT_EQ(shard.index, r);
      EXPECT_EQ(shard.count, 2);
      EXPECT_EQ(data::shard_rows(5, shard).begin, r == 0 ? 0 : 3);
      EXPECT_EQ(data::shard_rows(5, shard).end, r == 0 ? 3 : 5);
      EXPECT_EQ(data::shard_rows(1, shard).end - data::shard_rows(1, shard).begin, r == 0 ? 1 : 0);

      torch::nn::Sequential model(torch::nn::Linear(3, 2));
      {
        torch::NoGradGuard no_grad;
        for (auto& p : model->parameters()) p.fill_(r + 1.0);  // differ until rank 0's are broadcast
      }
      strategy->prepare(model, GradientSync::kDuringBackward);
      for (auto& p : model->parameters()) EXPECT_TRUE(p.equal(torch::ones_like(p)));
      // The Reducer sums the gradients during the step's last backward: rank r's input is r + 1.
      const torch::Tensor outputs = strategy->forward_to_train(model, torch::full({1, 3}, r + 1.0), /*last=*/true);
      strategy->run_backward([&] { outputs.sum().backward(); });
      strategy->after_backward(model);
      const auto& linear = model[0]->as<torch::nn::Linear>();
      EXPECT_TRUE(linear->weight.grad().equal(torch::full({2, 3}, 3.0)));  // 1 + 2
      EXPECT_TRUE(linear->bias.grad().equal(torch::full({2}, 2.0)));       // 1 + 1

      // Under the CUDA graph the step sums them itself, after backward, to the same result.
      torch::nn::Sequential graphed(torch::nn::Linear(3, 2));
      strategy->prepare(graphed, GradientSync::kAfterBackward);
      graphed->forward(torch::full({1, 3}, r + 1.0)).sum().backward();
      strategy->sum_gradients(graphed);
      const auto& summed = graphed[0]->as<torch::nn::Linear>();
      EXPECT_TRUE(summed->weight.grad().equal(torch::full({2, 3}, 3.0)));
      EXPECT_TRUE(summed->bias.grad().equal(torch::full({2}, 2.0)));

      // Batchnorm's running statistics drift apart on the ranks' own rows; then every rank takes rank 0's.
      torch::nn::Sequential normed(torch::nn::BatchNorm1d(2));
      normed->forward(torch::full({4, 2}, r + 1.0) + torch::arange(4.0).view({4, 1}));
      const auto& batchnorm = normed[0]->as<torch::nn::BatchNorm1d>();
      EXPECT_TRUE(batchnorm->running_mean.allclose(torch::full({2}, 0.1 * (r + 2.5)))) << batchnorm->running_mean;
      strategy->broadcast_buffers(normed);
      EXPECT_TRUE(batchnorm->running_mean.allclose(torch::full({2}, 0.1 * 2.5)))
          << "rank " << r << ": " << batchnorm->running_mean;
      EXPECT_TRUE(batchnorm->running_var.allclose(torch::full({2}, 0.9 + 0.1 * 5.0 / 3)));
      EXPECT_EQ(batchnorm->num_batches_tracked.item<int64_t>(), 1);
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace
}  // namespace gputrain::parallel
