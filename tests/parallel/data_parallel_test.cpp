// dp on CPU replica threads: the same code path as on GPUs.
#include <gtest/gtest.h>

#include <torch/nn/parallel/data_parallel.h>
#include <torch/torch.h>

#include <atomic>
#include <map>
#include <sstream>

#include "gputrain/config/load.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/step/amp.h"
#include "gputrain/train/trainer.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::parallel {
namespace {

config::LoadedConfig cfg(const std::vector<std::string>& overrides) {
  return config::load_config_text(R"(
seed: 5
device: cpu
data: {dataset: synthetic, samples: 200, test_samples: 50, features: 6, classes: 3, batch_size: 30, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [12]}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {epochs: 2, log_every: 1000}
)",
                                  "dp.yaml", overrides);
}

torch::nn::Sequential train(const std::vector<std::string>& overrides) {
  train::Trainer trainer(plan::resolve_run(cfg(overrides), device::DevicePlan{}, {}));
  train::TrainObserver quiet;
  trainer.fit(quiet);
  return trainer.model();
}

// Also with optim.lookahead, whose syncs change the weights the replicas copy.
TEST(DataParallel, TwoCpuReplicasMatchOneDevice) {
  for (const std::string lookahead : {"optim.lookahead.k=0", "optim.lookahead.k=3"}) {
    SCOPED_TRACE(lookahead);
    const auto single = train({"strategy=single", lookahead});
    const auto dp = train({"strategy=dp", "dp.replicas=2", lookahead});
    const auto p = single->parameters();
    const auto q = dp->parameters();
    ASSERT_EQ(p.size(), q.size());
    for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << i;
  }
}

// model.freeze under dp: the replicas (clones) must leave the frozen
// parameters without gradients and the frozen batchnorm in eval mode, or the
// clipped gradient's norm and the batchnorm's outputs differ from one
// device's. Through the eager step with clipping and the foreach and fused kernels.
TEST(DataParallel, FrozenLayersStayAsTheyWereAndTheRestTrainsAsOnOneDevice) {
  const std::vector<std::string> frozen{"model.name=layers",
                                        "model.layers=[{type: linear, out_features: 12}, batchnorm, relu, linear]",
                                        "model.freeze=[fc1, bn1]", "train.grad_clip=0.05", "train.epochs=1"};
  for (const std::string kernel : {"optim.foreach=true", "optim.fused=true"}) {
    std::vector<std::string> overrides = frozen;
    overrides.push_back(kernel);
    overrides.push_back("strategy=single");
    train::Trainer start(plan::resolve_run(cfg(overrides), device::DevicePlan{}, {}));
    std::map<std::string, torch::Tensor> before;
    for (const auto& t : start.model()->named_parameters()) before[t.key()] = t.value().detach().clone();
    for (const auto& t : start.model()->named_buffers()) before[t.key()] = t.value().detach().clone();
    const auto single = train(overrides);
    overrides.back() = "strategy=dp";
    overrides.push_back("dp.replicas=2");
    const auto dp = train(overrides);
    for (const auto& model : {single, dp}) {
      for (const std::string name : {"fc1.weight", "fc1.bias", "bn1.weight", "bn1.running_mean", "bn1.running_var"}) {
        const torch::Tensor now =
            name.find("running") == std::string::npos ? model->named_parameters()[name] : model->named_buffers()[name];
        EXPECT_TRUE(torch::equal(now, before.at(name))) << kernel << ": " << name;
      }
      EXPECT_FALSE(torch::equal(model->named_parameters()["fc2.weight"], before.at("fc2.weight"))) << kernel;
    }
    const auto p = single->parameters();
    const auto q = dp->parameters();
    for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::allclose(p[i], q[i], 1e-5, 1e-6)) << kernel << i;
  }
}

torch::nn::Sequential small_net() {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(6, 12), torch::nn::ReLU(), torch::nn::Linear(12, 3));
}

std::unique_ptr<Strategy> two_cpu_replicas() {
  StrategyPlan plan;
  plan.kind = StrategyKind::kDataParallel;
  plan.replicas = {torch::Device(torch::kCPU), torch::Device(torch::kCPU)};
  return make_strategy(plan, {});
}

TEST(DataParallel, DescribesOneReplicaInTheSingular) {
  StrategyPlan plan;
  plan.kind = StrategyKind::kDataParallel;
  plan.replicas = {torch::Device(torch::kCPU)};
  EXPECT_EQ(make_strategy(plan, {})->describe(), "data-parallel over 1 replica (cpu)");
  EXPECT_EQ(two_cpu_replicas()->describe(), "data-parallel over 2 replicas (cpu, cpu)");
}

// The kept replicas give, to the bit, what LibTorch's replicate() per step
// gave (two replicas: the gradient sum has one order), step after step: so
// the copies are refreshed after each optimizer step.
TEST(DataParallel, KeptReplicasMatchReplicatingEveryStep) {
  torch::nn::Sequential reference = small_net();
  torch::nn::Sequential model = small_net();
  torch::optim::SGD ref_opt(reference->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const auto strategy = two_cpu_replicas();
  const std::vector<torch::Device> cpus{torch::kCPU, torch::kCPU};
  torch::manual_seed(11);
  for (int step = 0; step < 4; ++step) {
    const torch::Tensor x = torch::randn({9, 6});
    const torch::Tensor y = torch::randint(0, 3, {9});
    ref_opt.zero_grad();
    const auto replicas = torch::nn::parallel::replicate(reference.ptr(), cpus);
    const auto chunks = x.split_with_sizes({5, 4});
    const torch::Tensor ref_out = torch::cat({replicas[0]->forward(chunks[0]), replicas[1]->forward(chunks[1])});
    torch::nn::functional::cross_entropy(ref_out, y).backward();
    ref_opt.step();

    opt.zero_grad();
    torch::nn::functional::cross_entropy(strategy->forward(model, x), y).backward();
    strategy->after_backward(model);
    opt.step();
  }
  const auto p = reference->parameters();
  const auto q = model->parameters();
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(torch::equal(p[i], q[i])) << i;
}

TEST(DataParallel, ReplicasRunUnderTheCallersGradModeAndAutocast) {
  std::atomic<int> recording{0};  // forward passes that ran with autograd on, over both replicas
  torch::nn::Sequential model = small_net();
  model->push_back(torch::nn::Functional([&recording](const torch::Tensor& x) {
    if (torch::GradMode::is_enabled()) ++recording;
    return x;
  }));
  const auto strategy = two_cpu_replicas();
  const torch::Tensor x = torch::randn({8, 6});
  {
    torch::NoGradGuard no_grad;  // evaluation: no replica may record a graph
    strategy->forward(model, x);
  }
  EXPECT_EQ(recording.load(), 0);
  EXPECT_TRUE(strategy->forward(model, x).requires_grad());
  EXPECT_EQ(recording.load(), 2);
  step::AutocastScope autocast(config::AmpMode::kBf16, c10::DeviceType::CPU);
  // A replica thread without the caller's autocast would give float32 rows, and the gathered output float32.
  EXPECT_EQ(strategy->forward(model, x).scalar_type(), torch::kBFloat16);
}

TEST(DataParallel, MakingReplicasDrawsNothingFromTheGlobalGenerator) {
  torch::nn::Sequential model = small_net();
  const auto strategy = two_cpu_replicas();
  torch::manual_seed(21);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(21);
  strategy->forward(model, torch::ones({8, 6}));
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

StrategyKeys keys(config::StrategyName strategy = config::StrategyName::kAuto, int64_t dp_replicas = 0) {
  StrategyKeys k;
  k.strategy = strategy;
  k.dp.replicas = dp_replicas;
  return k;
}

// The plan carries the strategy's options, so that make_strategy needs no config.
TEST(StrategyPlan, CarriesTheStrategysOptions) {
  StrategyKeys logged = keys();
  logged.log_replicas = true;
  logged.ddp.timeout_s = 7;
  const StrategyPlan plan = plan_strategy(logged, {}, {});
  EXPECT_TRUE(plan.log_replicas);
  EXPECT_EQ(plan.timeout_s, 7);
  EXPECT_FALSE(plan_strategy(keys(), {}, {}).log_replicas);
}

// Errors name their key only: the run's plan places them in the file.
std::string refusal(const StrategyKeys& k, const device::DevicePlan& devices, const LaunchInfo& launch) {
  try {
    plan_strategy(k, devices, launch);
  } catch (const ConfigError& e) {
    EXPECT_FALSE(e.where().known()) << e.what();
    return e.key() + ": " + e.problem();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

TEST(StrategyPlan, AutoAndExplicitChoices) {
  using config::StrategyName;
  const device::DevicePlan cpu;
  EXPECT_EQ(plan_strategy(keys(), cpu, {}).kind, StrategyKind::kSingle);
  EXPECT_EQ(plan_strategy(keys(StrategyName::kDp, 3), cpu, {}).replicas.size(), 3u);
  LaunchInfo launched;
  launched.world_size = 2;
  EXPECT_EQ(plan_strategy(keys(), cpu, launched).kind, StrategyKind::kDistributed);
  EXPECT_EQ(refusal(keys(StrategyName::kDp), cpu, launched),
            "strategy: 'dp' cannot run as one of 2 launched processes (WORLD_SIZE=2); use strategy: ddp or auto");

  device::DevicePlan two_gpus;
  two_gpus.kind = device::DeviceKind::kCuda;
  two_gpus.gpus = {0, 1};
  const StrategyPlan dp = plan_strategy(keys(StrategyName::kDp), two_gpus, {});
  EXPECT_EQ(dp.kind, StrategyKind::kDataParallel);
  EXPECT_EQ(dp.replicas, (std::vector<torch::Device>{torch::Device("cuda:0"), torch::Device("cuda:1")}));
  EXPECT_EQ(plan_strategy(keys(), two_gpus, {}).kind, StrategyKind::kSingle);  // auto: never dp
  EXPECT_NE(refusal(keys(StrategyName::kDp, 3), two_gpus, {}).find("dp.replicas: 3 replicas asked for but 2 GPUs"),
            std::string::npos);
  StrategyKeys nccl = keys(StrategyName::kDdp);
  nccl.ddp.backend = config::DdpBackend::kNccl;
  EXPECT_NE(refusal(nccl, cpu, {}).find("ddp.backend: nccl runs between CUDA GPUs only"), std::string::npos);
  launched.local_rank = 1;
  EXPECT_EQ(plan_strategy(keys(), two_gpus, launched).replicas.front(), torch::Device("cuda:1"));
}

// Slurm's --gpus-per-task=1 shows each task one GPU while SLURM_LOCALID runs 0..N-1.
TEST(StrategyPlan, EachTaskOfOneVisibleGpuUsesIt) {
  device::DevicePlan one_gpu;
  one_gpu.kind = device::DeviceKind::kCuda;
  one_gpu.gpus = {0};
  LaunchInfo task;
  task.world_size = 4;
  task.rank = task.local_rank = 3;
  const StrategyPlan plan = plan_strategy(keys(), one_gpu, task);
  EXPECT_EQ(plan.replicas.front(), torch::Device("cuda:0"));
  EXPECT_NE(plan.reason.find("local rank 3 uses cuda:0, the one GPU it sees"), std::string::npos) << plan.reason;

  device::DevicePlan two_gpus = one_gpu;
  two_gpus.gpus = {0, 1};
  const StrategyPlan wrapped = plan_strategy(keys(), two_gpus, task);
  EXPECT_EQ(wrapped.replicas.front(), torch::Device("cuda:1"));
  EXPECT_NE(wrapped.reason.find("local rank 3 uses cuda:1 (local rank modulo the 2 selected GPUs)"), std::string::npos)
      << wrapped.reason;
}

// The message part of each log line: what follows "[info] ".
std::vector<std::string> messages(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find("[info] ");
    if (at != std::string::npos) out.push_back(line.substr(at + 7));
  }
  return out;
}

TEST(DataParallel, SeedEightGpuLogReproducedLineForLine) {
  testing::TempDir dir;
  // The shipped config as it is: the 8-way split on any machine.
  const auto r =
      testing::run_gputrain({"train", "--config", "configs/seed_dataparallel.yaml", "--output", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> expected{"Let's use 8 CPU replicas!"};
  for (int batch = 0; batch < 3; ++batch) {
    for (int i = 0; i < 7; ++i) expected.push_back("\tIn Model: input size [4, 5] output size [4, 2]");
    expected.push_back("\tIn Model: input size [2, 5] output size [2, 2]");
    expected.push_back("Outside: input size [30, 5] output_size [30, 2]");
  }
  for (int i = 0; i < 5; ++i) expected.push_back("\tIn Model: input size [2, 5] output size [2, 2]");
  expected.push_back("Outside: input size [10, 5] output_size [10, 2]");

  std::vector<std::string> seen;
  for (const auto& m : messages(r.err)) {
    if (m.rfind("Let's use", 0) == 0 || m.find("In Model:") != std::string::npos || m.rfind("Outside:", 0) == 0) {
      seen.push_back(m);
    }
  }
  EXPECT_EQ(seen, expected);
}

}  // namespace
}  // namespace gputrain::parallel
