// The fast paths in short CPU runs of the trainer: each trains like the
// default path (exactly, or within rounding), and `bench` reports every phase.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "gputrain/bench/bench.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/load.h"
#include "gputrain/data/generate.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/plan/fast_paths.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/step/backends.h"
#include "gputrain/train/trainer.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::train {
namespace {

using bench::BenchReport;
using bench::format_bench;
using bench::LoaderBenchReport;
using bench::run_bench;
using bench::run_loader_bench;
using gputrain::testing::TempDir;
using plan::FastPaths;
using plan::kSmallModelMacs;
using plan::model_facts;
using plan::plan_fast_paths;
using plan::resolve_matmul_precision;
using plan::RunFacts;
using step::configure_backends;

// `loaded`'s device keys resolved on this machine's devices.
device::DevicePlan probed_devices(const config::LoadedConfig& loaded) {
  return device::resolve_devices(loaded.config.device, loaded.config.gpus, device::probe_devices(std::nullopt));
}

// `loaded` resolved for this machine's devices, as `gputrain bench` resolves it.
plan::RunPlan on_visible_devices(const config::LoadedConfig& loaded) {
  return plan::resolve_run(loaded, probed_devices(loaded), {});
}

struct Quiet : TrainObserver {};

// A few CIFAR-format images, written once for every test here.
class FastPathRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fast-paths");
    data::write_cifar10_set(dir_->path(), {40, 16, 2});
  }
  static void TearDownTestSuite() { delete dir_; }

  // The CIFAR-10 tutorial CNN with normalisation, crop and flip, one epoch of 40 images.
  static config::LoadedConfig cifar(std::vector<std::string> overrides) {
    overrides.push_back("data.root=" + dir_->path().string());
    return config::load_config_text(R"(
seed: 1
device: cpu
data: {dataset: cifar10, batch_size: 16, num_workers: 2, pin_memory: false,
       normalize: {mean: [0.5], std: [0.5]}, augment: {random_crop: 2, hflip: true}}
model: {name: cifar10_cnn}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
train: {epochs: 1, log_every: 100}
)",
                                    "f.yaml", overrides);
  }

  static std::vector<torch::Tensor> trained(const config::LoadedConfig& loaded, const device::DevicePlan& devices = {},
                                            const parallel::LaunchInfo& launch = {}) {
    Trainer trainer(plan::resolve_run(loaded, devices, launch));
    Quiet quiet;
    trainer.fit(quiet);
    std::vector<torch::Tensor> params;
    for (const auto& p : trainer.model()->parameters()) params.push_back(p.detach().cpu().contiguous());
    return params;
  }

  static inline TempDir* dir_ = nullptr;
};

// The fixture's helpers for free functions.
struct FastPathRunsAccess : FastPathRuns {
  using FastPathRuns::cifar;
  using FastPathRuns::trained;
};

void expect_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(tolerance == 0 ? torch::equal(a[i], b[i]) : torch::allclose(a[i], b[i], tolerance, tolerance))
        << "parameter " << i << ": max difference " << (a[i] - b[i]).abs().max().item<double>();
  }
}

// Every fast path off: the plain loop over samples and parameters.
std::vector<std::string> plain(std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), {"data.device_cache=off", "optim.fused=off", "train.cuda_graph=off",
                                       "train.channels_last=off", "train.cudnn_benchmark=off", "train.threads=0"});
  return overrides;
}

TEST_F(FastPathRuns, DeviceLoaderTrainsExactlyLikeTheHostLoader) {
  expect_equal(trained(cifar(plain({"data.device_cache=true"}))), trained(cifar(plain())), 0);
}

TEST_F(FastPathRuns, ChannelsLastTrainsLikeContiguous) {
  expect_equal(trained(cifar(plain({"train.channels_last=true"}))), trained(cifar(plain())), 1e-4);
}

// Issue 38: the plan decides each fast path once; the trainer applies that
// decision instead of deciding again.
TEST_F(FastPathRuns, TheTrainerAppliesThePlansDecisions) {
  plan::RunPlan plan = on_visible_devices(cifar(plain()));
  ASSERT_FALSE(plan.step.fast.channels_last);
  plan.step.fast.channels_last = true;
  const Trainer trainer(plan);
  const torch::Tensor conv1 = trainer.model()->parameters().front();
  ASSERT_EQ(conv1.dim(), 4);
  EXPECT_TRUE(conv1.is_contiguous(at::MemoryFormat::ChannelsLast));
}

// Parameter groups with their own weight decay and lr (optim.no_decay_bias_norm,
// optim.bias_lr_multiplier) under a schedule that changes the lr every step.
std::vector<std::string> with_groups(std::vector<std::string> overrides) {
  overrides.insert(overrides.end(),
                   {"optim.weight_decay=0.01", "optim.no_decay_bias_norm=true", "optim.bias_lr_multiplier=8",
                    "optim.scheduler=linear_warmup_decay", "optim.warmup_fraction=0.3", "optim.cooldown_fraction=0.5"});
  return overrides;
}

TEST_F(FastPathRuns, ForeachAndFusedOptimizersTrainLikeTheLoop) {
  for (const bool groups : {false, true}) {
    SCOPED_TRACE(groups ? "parameter groups" : "one group");
    auto config = [&](std::vector<std::string> overrides) {
      return cifar(groups ? with_groups(plain(std::move(overrides))) : plain(std::move(overrides)));
    };
    const auto loop = trained(config({}));
    expect_equal(trained(config({"optim.foreach=true"})), loop, 1e-4);
    expect_equal(trained(config({"optim.fused=true"})), loop, 1e-4);
  }
}

TEST_F(FastPathRuns, CudaGraphOffCudaFallsBackToEagerSteps) {
  expect_equal(trained(cifar(plain({"train.cuda_graph=true", "optim.fused=true", "train.cudnn_benchmark=true"}))),
               trained(cifar(plain({"optim.fused=true"}))), 0);
}

// auto decides, on this CPU: the device loader, the fused step, channels-last
// for the colour images, and the rest off; the run is bitwise the run with
// those settings written out.
TEST_F(FastPathRuns, AutoTrainsExactlyLikeTheSettingsItChose) {
  const auto automatic = trained(cifar({}));
  // train.threads: auto leaves other work its CPUs, so its choice depends on the machine's load at the time.
  const std::string threads = "train.threads=" + std::to_string(at::get_num_threads());
  expect_equal(automatic,
               trained(cifar({"data.device_cache=on", "optim.fused=on", "train.cuda_graph=off",
                              "train.channels_last=on", "train.cudnn_benchmark=off", threads})),
               0);
}

TEST_F(FastPathRuns, AutoThreadsOfASmallModelTrainLikeOneThreadSetByHand) {
  const std::vector<std::string> mlp{"model.name=mlp", "model.hidden=[8]", "data.batch_size=4"};
  std::vector<std::string> one_thread = mlp;
  one_thread.push_back("train.threads=1");
  const auto automatic = trained(cifar(mlp));
  EXPECT_EQ(at::get_num_threads(), 1) << "3,072 -> 8 -> 10 on 4 samples: 0.1 M multiply-adds";
  expect_equal(automatic, trained(cifar(one_thread)), 0);
}

TEST_F(FastPathRuns, BenchTimesEveryPhaseAndTheComputeBound) {
  const auto loaded = cifar({"data.device_cache=true"});
  const BenchReport r = run_bench(on_visible_devices(loaded), {3, 1});
  ASSERT_EQ(r.phases.size(), 5u);
  const std::vector<std::string> names{"data", "forward", "backward", "optimizer", "step"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(r.phases[i].name, names[i]);
    EXPECT_GE(r.phases[i].mean_ms, r.phases[i].min_ms);
  }
  EXPECT_GT(r.phases[4].mean_ms, r.phases[1].mean_ms);
  EXPECT_EQ(r.batch, 16);
  EXPECT_GT(r.samples_per_s, 0);
  EXPECT_GT(r.bound_samples_per_s, 0);
  const std::string table = format_bench(r);
  for (const auto& name : names) EXPECT_NE(table.find("\n" + name + " "), std::string::npos) << table;
  EXPECT_NE(table.find("compute bound"), std::string::npos) << table;
  EXPECT_FALSE(r.bound_graphed) << "no CUDA graph on the CPU";
}

// Issue 61 #2: bench times the run's own step, with what the run's step does
// beyond the update (clipping here) and the run's micro-batches a step.
TEST_F(FastPathRuns, BenchTimesTheTrainingStepWithItsClippingAndMicroBatches) {
  const auto loaded = cifar({"data.device_cache=true", "train.grad_clip=1", "train.accumulation_steps=2"});
  const BenchReport r = run_bench(on_visible_devices(loaded), {2, 1});
  EXPECT_EQ(r.batch, 8) << "16 a step in 2 micro-batches";
  EXPECT_EQ(r.accumulation, 2);
  EXPECT_NE(r.step.find("gradients clipped to norm 1"), std::string::npos) << r.step;
  EXPECT_NE(r.step.find("non-finite check"), std::string::npos) << r.step;
  EXPECT_NE(format_bench(r).find("the training step, with gradients clipped to norm 1"), std::string::npos)
      << format_bench(r);
}

// The loader alone: the planned batches, as many as asked, on either loader.
TEST_F(FastPathRuns, LoaderBenchTimesThePlannedBatchesAlone) {
  const LoaderBenchReport host = run_loader_bench(on_visible_devices(cifar({"data.device_cache=false"})), {5, 2});
  EXPECT_EQ(host.batch, 16);
  EXPECT_EQ(host.batches, 5);
  EXPECT_EQ(host.warmup, 2);
  EXPECT_FALSE(host.device_cache);
  EXPECT_GT(host.samples_per_s, 0);
  EXPECT_NE(format_loader_bench(host).find(count_of(host.workers, "worker") + ", batch 16, 5 batches after 2 warm-up"),
            std::string::npos)
      << format_loader_bench(host);
  const LoaderBenchReport resident = run_loader_bench(on_visible_devices(cifar({"data.device_cache=true"})), {3, 0});
  EXPECT_TRUE(resident.device_cache);
  EXPECT_NE(format_loader_bench(resident).find("assembled on the device"), std::string::npos);
}

// The graph replays what eager steps compute: same weights after an epoch.
TEST_F(FastPathRuns, CudaGraphTrainsLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto on_gpu = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"device=cuda", "optim.fused=true", "data.drop_last=true", "train.epochs=4"});
    const auto loaded = cifar(overrides);
    return trained(loaded, probed_devices(loaded));
  };
  expect_equal(on_gpu({"train.cuda_graph=true"}), on_gpu({}), 1e-4);
  // Each group's lr is a device tensor the graph reads, rewritten every step by the schedule.
  expect_equal(on_gpu(with_groups({"train.cuda_graph=true"})), on_gpu(with_groups({"train.cuda_graph=false"})), 1e-4);
}

// optim.lookahead's sync between two replays of the captured step: the graphed
// run ends where the eager one does (8 epochs of 2 steps: syncs at steps 3, 6,
// ..., 15, most of them after the graph's warm-up steps).
TEST_F(FastPathRuns, CudaGraphWithLookaheadTrainsLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto on_gpu = [](const std::string& graph) {
    const auto loaded = cifar({"device=cuda", "optim.fused=true", "data.drop_last=true", "train.epochs=8",
                               "optim.lookahead.k=3", "train.cuda_graph=" + graph});
    return trained(loaded, probed_devices(loaded));
  };
  expect_equal(on_gpu("true"), on_gpu("false"), 1e-4);
}

// Work that once kept the graph off is now captured with the step; each graphed
// run trains like its eager twin. Batches of 16 with a short last one of 8.
std::vector<torch::Tensor> graphed_on_gpu(std::vector<std::string> overrides, bool graph) {
  overrides.insert(overrides.end(), {"device=cuda", "optim.fused=true", "train.epochs=4",
                                     graph ? "train.cuda_graph=true" : "train.cuda_graph=false"});
  const auto loaded = FastPathRunsAccess::cifar(overrides);
  return FastPathRunsAccess::trained(loaded, probed_devices(loaded));
}

TEST_F(FastPathRuns, CudaGraphClipsLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  expect_equal(graphed_on_gpu({"train.grad_clip=0.05"}, true), graphed_on_gpu({"train.grad_clip=0.05"}, false), 1e-4);
}

// The class weights are one device tensor the captured loss reads on every replay.
TEST_F(FastPathRuns, CudaGraphWeighsClassesLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string weights = "train.class_weights=[1, 3, 0.5, 1, 1, 2, 1, 1, 1, 0.25]";
  expect_equal(graphed_on_gpu({weights}, true), graphed_on_gpu({weights}, false), 1e-4);
}

// The 2 micro-batches of a step replay as one graph. 40 images: micro-batches
// of 8 leave a last group of one micro-batch, those of 6 a last group of 6 and
// 4; both run eagerly, on the gradients and optimizer state the graph replays.
TEST_F(FastPathRuns, CudaGraphAccumulatesLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const char* batch : {"data.batch_size=16", "data.batch_size=12"}) {
    SCOPED_TRACE(batch);
    const std::vector<std::string> accumulation{"train.accumulation_steps=2", batch};
    expect_equal(graphed_on_gpu(accumulation, true), graphed_on_gpu(accumulation, false), 1e-4);
  }
}

// Autocast runs inside the graph without its weight cache, and fp16's scaler
// unscales, checks and updates on the device: the weights are the eager
// steps' up to the rounding of 16-bit math.
TEST_F(FastPathRuns, CudaGraphRunsAmpLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::vector<std::string>& amp :
       {std::vector<std::string>{"train.amp=bf16"}, std::vector<std::string>{"train.amp=fp16"},
        std::vector<std::string>{"train.amp=fp16", "train.accumulation_steps=2", "train.grad_clip=0.05"}}) {
    SCOPED_TRACE(amp.front() + (amp.size() > 1 ? " with accumulation and clipping" : ""));
    expect_equal(graphed_on_gpu(amp, true), graphed_on_gpu(amp, false), 1e-3);
  }
}

// optim.fused off: the foreach step reads its lr, step count and skip from
// device tensors, so the graph captures it (SGD with momentum, and Adam).
TEST_F(FastPathRuns, CudaGraphRunsTheForeachStepLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::vector<std::string>& optimizer :
       {std::vector<std::string>{"optim.name=sgd"}, std::vector<std::string>{"optim.name=adam", "optim.lr=0.001"}}) {
    SCOPED_TRACE(optimizer.front());
    auto on_gpu = [&](bool graph) {
      std::vector<std::string> overrides{"device=cuda", "optim.fused=false", "train.epochs=4",
                                         graph ? "train.cuda_graph=true" : "train.cuda_graph=false"};
      overrides.insert(overrides.end(), optimizer.begin(), optimizer.end());
      const auto loaded = cifar(overrides);
      return trained(loaded, probed_devices(loaded));
    };
    expect_equal(on_gpu(true), on_gpu(false), 1e-4);
  }
}

// ddp over NCCL (one rank: no machine so far had two GPUs) captures the step
// with its gradients' all-reduce and the ranks' on_nan agreement: the weights
// are those of ddp's eager steps through c10d's Reducer.
TEST_F(FastPathRuns, CudaGraphCapturesDdpsAllReduce_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto under_ddp = [](bool graph) {
    const auto loaded = cifar({"device=cuda", "optim.fused=true", "train.epochs=4", "strategy=ddp", "ddp.backend=nccl",
                               graph ? "train.cuda_graph=true" : "train.cuda_graph=false"});
    parallel::LaunchInfo launch;
    launch.master_port = testing::free_port();
    return trained(loaded, probed_devices(loaded), launch);
  };
  expect_equal(under_ddp(true), under_ddp(false), 1e-4);
}

// 40 images in batches of 16 leave a last batch of 8 each epoch: it runs
// eagerly, before and after the capture, on the gradients and optimizer state
// that the graph replays, so the weights stay those of eager steps.
TEST_F(FastPathRuns, CudaGraphRunsTheShortLastBatchEagerly_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto on_gpu = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"device=cuda", "optim.fused=true", "train.epochs=4"});
    const auto loaded = cifar(overrides);
    return trained(loaded, probed_devices(loaded));
  };
  expect_equal(on_gpu({"train.cuda_graph=true"}), on_gpu({"train.cuda_graph=false"}), 1e-4);
}

// Each epoch's short last batch runs eagerly on the graph's side stream. Taking
// a new stream from the pool for each once grew the allocator's memory every
// epoch (it keeps freed blocks per stream; cuBLAS keeps a workspace per stream).
// 40 epochs cycle through all 32 streams of the pool.
TEST_F(FastPathRuns, CudaGraphShortBatchesKeepMemoryFlat_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  struct MemoryPerEpoch : TrainObserver {
    std::vector<int64_t> allocated, reserved;
    void on_epoch(const EpochMetrics& m) override {
      allocated.push_back(m.memory_allocated);
      reserved.push_back(m.memory_reserved);
    }
  };
  const auto loaded = cifar({"device=cuda", "optim.fused=true", "train.cuda_graph=true", "train.epochs=40"});
  Trainer trainer(plan::resolve_run(loaded, probed_devices(loaded), {}));
  MemoryPerEpoch memory;
  trainer.fit(memory);
  ASSERT_EQ(memory.allocated.size(), 40U);
  constexpr int64_t kSlack = int64_t{4} << 20;  // a cuBLAS workspace alone is 32 MiB or more
  EXPECT_LT(std::abs(memory.allocated.back() - memory.allocated[4]), kSlack) << memory.allocated[4];
  EXPECT_LT(std::abs(memory.reserved.back() - memory.reserved[4]), kSlack) << memory.reserved[4];
}

// auto on a GPU turns every fast path it can on (device cache, fused step,
// CUDA graph, cuDNN benchmark) and still trains like all of them off.
TEST_F(FastPathRuns, AutoOnTheGpuTrainsLikeEveryFastPathOff_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto on_gpu = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"device=cuda", "train.epochs=4"});
    const auto loaded = cifar(overrides);
    return trained(loaded, probed_devices(loaded));
  };
  expect_equal(on_gpu({}), on_gpu(plain()), 1e-4);
}

// On a GPU the defaults replay a CUDA graph, and so does bench's compute bound.
TEST_F(FastPathRuns, BenchBoundReplaysTheGraphOnTheGpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto loaded = cifar({"device=cuda"});
  const BenchReport r = run_bench(on_visible_devices(loaded), {3, 1});
  EXPECT_TRUE(r.bound_graphed);
  EXPECT_GT(r.bound_samples_per_s, 0);
  EXPECT_NE(format_bench(r).find("replayed as a CUDA graph"), std::string::npos) << format_bench(r);
}

TEST(MatmulPrecision, AutoIsTf32OnCudaAndFullFloat32Elsewhere) {
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kAuto, torch::Device(torch::kCUDA, 0)).value, "high");
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kAuto, torch::Device(torch::kCPU)).value, "highest");
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kMedium, torch::Device(torch::kCPU)).value, "medium");
  config::ExperimentConfig high;
  high.train.matmul_precision = config::MatmulPrecision::kHigh;
  const FastPaths fast = plan_fast_paths(high, RunFacts{});
  EXPECT_EQ(fast.matmul_precision.value, "high");
  EXPECT_EQ(fast.matmul_precision.reason, "train.matmul_precision");
  EXPECT_EQ(plan_fast_paths(config::ExperimentConfig{}, RunFacts{}).matmul_precision.value, "highest");
  configure_backends(fast.matmul_precision.value, 0, false);
  EXPECT_EQ(at::globalContext().float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  configure_backends("highest", 0, false);
  EXPECT_EQ(at::globalContext().float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
}

TEST(ConfigureBackends, ThreadsGoBackToLibTorchsDefaultAfterARunThatSetThem) {
  const int before = at::get_num_threads();
  configure_backends("highest", 0, false);
  configure_backends("highest", 1, false);
  EXPECT_EQ(at::get_num_threads(), 1);
  configure_backends("highest", 0, false);
  EXPECT_EQ(at::get_num_threads(), before);
}

// The auto rules on made-up runs: no device is touched.
// Micro-batches of one sample, so a sample's multiply-adds are the micro-batch's.
RunFacts facts(torch::Device device, bool convolutional, int64_t micro_batch_macs, int64_t image_channels = 1) {
  RunFacts f;
  f.device = device;
  f.model.convolutional = convolutional;
  f.model.image_channels = convolutional ? image_channels : 0;
  f.model.sample_macs = micro_batch_macs;
  f.micro_batch = 1;
  return f;
}

bool has(const std::vector<std::string>& lines, const std::string& line) {
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

TEST(FastPathPlan, OnTheCpuTheFusedStepAndThreadsByModelSize) {
  const config::ExperimentConfig c;
  const FastPaths cnn = plan_fast_paths(c, facts(torch::Device(torch::kCPU), true, 36'000'000));
  EXPECT_TRUE(cnn.fused);
  EXPECT_FALSE(cnn.cuda_graph || cnn.channels_last || cnn.cudnn_benchmark);
  EXPECT_EQ(cnn.threads, 0);
  EXPECT_TRUE(has(cnn.decisions, "optim.fused: on (auto: fused sgd kernel available for cpu)")) << cnn.decisions[0];
  EXPECT_TRUE(has(cnn.decisions, "train.cuda_graph: off (auto: it needs CUDA and the run is on cpu)"));
  EXPECT_TRUE(has(cnn.decisions,
                  "train.channels_last: off (auto: single-channel images ran slower channels-last on cpu (measured))"));
  const FastPaths colour = plan_fast_paths(c, facts(torch::Device(torch::kCPU), true, 36'000'000, 3));
  EXPECT_TRUE(colour.channels_last);
  EXPECT_TRUE(has(colour.decisions,
                  "train.channels_last: on (auto: oneDNN's channels-last convolutions on 3-channel images (measured "
                  "faster))"));
  EXPECT_TRUE(has(cnn.decisions, "train.cudnn_benchmark: off (auto: cuDNN does not run on cpu)"));
  EXPECT_TRUE(has(cnn.decisions,
                  "train.threads: LibTorch's default (auto: a micro-batch's forward pass is 36.0 M "
                  "multiply-adds)"));

  RunFacts wide_after_the_image = facts(torch::Device(torch::kCPU), true, 36'000'000);
  wide_after_the_image.model.image_conv_share = 0.0095;
  const FastPaths residual = plan_fast_paths(c, wide_after_the_image);
  EXPECT_TRUE(residual.channels_last);
  EXPECT_TRUE(has(residual.decisions,
                  "train.channels_last: on (auto: the convolution reading the 1-channel images is 0.9% of the work; "
                  "the rest runs faster channels-last on cpu (measured))"));

  const FastPaths mlp = plan_fast_paths(c, facts(torch::Device(torch::kCPU), false, 45'056));
  EXPECT_EQ(mlp.threads, 1);
  EXPECT_TRUE(has(mlp.decisions, "train.channels_last: off (auto: the model has no convolutions)"));
  EXPECT_EQ(plan_fast_paths(c, facts(torch::Device(torch::kCPU), false, kSmallModelMacs)).threads, 0);
}

TEST(FastPathPlan, OnTheCpuAutoThreadsLeaveOtherWorkItsCpus) {
  config::ExperimentConfig c;
  RunFacts shared = facts(torch::Device(torch::kCPU), false, kSmallModelMacs);
  shared.cpus = device::CpuShare{};
  shared.cpus->affinity = 2;
  shared.cpus->runnable = 2;  // two other runs on two cores
  const FastPaths busy = plan_fast_paths(c, shared);
  EXPECT_EQ(busy.threads, 1);
  EXPECT_TRUE(
      has(busy.decisions,
          "train.threads: 1 (auto: 2 usable CPUs (affinity 2, no cgroup quota), other work 2.0 (0.00 CPUs busy, "
          "2 runnable); no more threads than free CPUs, so none spin-waits on a descheduled one)"));
  shared.model.sample_macs = 45'056;
  EXPECT_NE(plan_fast_paths(c, shared).decisions.back().find("too small"), std::string::npos)
      << "a small model keeps its one thread, whatever the machine";
}

// optim.lookahead syncs outside the captured step: every decision stays as it was.
TEST(FastPathPlan, LookaheadLeavesTheCudaGraphAndTheFusedStepOn) {
  config::ExperimentConfig c;
  config::ExperimentConfig with_lookahead = c;
  with_lookahead.optim.lookahead = {5, 0.5};
  const RunFacts on_gpu = facts(torch::Device(torch::kCUDA, 0), true, 83'000'000);
  const FastPaths graphed = plan_fast_paths(with_lookahead, on_gpu);
  EXPECT_TRUE(graphed.cuda_graph && graphed.fused);
  EXPECT_EQ(graphed.decisions, plan_fast_paths(c, on_gpu).decisions);
}

TEST(FastPathPlan, OnCudaGraphsByDefaultAndChannelsLastNeedsAmp) {
  config::ExperimentConfig c;
  const torch::Device gpu(torch::kCUDA, 0);
  // 50,000 samples leave a last batch of 80: it runs eagerly, the graph the rest.
  const FastPaths graphed = plan_fast_paths(c, facts(gpu, true, 83'000'000));
  EXPECT_TRUE(graphed.cuda_graph && graphed.fused);
  EXPECT_FALSE(graphed.cudnn_benchmark) << "the CIFAR-10 tutorial CNN: the search costs more than it saves";
  EXPECT_FALSE(graphed.channels_last);
  EXPECT_EQ(graphed.threads, 0);
  EXPECT_TRUE(has(graphed.decisions, "train.threads: LibTorch's default (auto: the steps run on CUDA)"));
  EXPECT_TRUE(
      has(graphed.decisions, "train.cuda_graph: on (auto: one device, fused update, no host work inside the step)"));
  // dp steps replicas on host threads; ddp is captured with its all-reduce over NCCL, not over Gloo.
  RunFacts replicas = facts(gpu, true, 83'000'000);
  replicas.strategy = parallel::StrategyKind::kDataParallel;
  EXPECT_FALSE(plan_fast_paths(c, replicas).cuda_graph);
  RunFacts ranks = facts(gpu, true, 83'000'000);
  ranks.strategy = parallel::StrategyKind::kDistributed;
  EXPECT_TRUE(has(plan_fast_paths(c, ranks).decisions,
                  "train.cuda_graph: off (auto: ddp over gloo sums the gradients through the host (over NCCL the "
                  "all-reduce is captured))"));
  // optim.fused off: the foreach step, as PyTorch's default on CUDA; it reads its lr from the device too.
  config::ExperimentConfig unfused = c;
  unfused.optim.fused = config::Switch::kOff;
  const FastPaths foreach_step = plan_fast_paths(unfused, facts(gpu, true, 83'000'000));
  EXPECT_TRUE(foreach_step.foreach && foreach_step.cuda_graph && !foreach_step.fused);
  EXPECT_TRUE(has(foreach_step.decisions,
                  "optim.foreach: on (auto: optim.fused is off; multi-tensor kernels on CUDA, as PyTorch's default)"));
  EXPECT_TRUE(has(foreach_step.decisions,
                  "train.cuda_graph: on (auto: one device, foreach update, no host work inside the step)"));
  ranks.nccl = true;
  const FastPaths over_nccl = plan_fast_paths(c, ranks);
  EXPECT_TRUE(over_nccl.cuda_graph);
  EXPECT_TRUE(has(over_nccl.decisions,
                  "train.cuda_graph: on (auto: one device, fused update, no host work inside the step; captured "
                  "with the gradients' all-reduce over NCCL)"));

  RunFacts wide = facts(gpu, true, 83'000'000);
  wide.amp = config::AmpMode::kBf16;
  wide.model.tensor_core_channels = true;
  const FastPaths mixed = plan_fast_paths(c, wide);
  EXPECT_TRUE(mixed.channels_last);
  EXPECT_TRUE(mixed.cuda_graph) << "bf16 autocast is captured with the step";
  // PyTorch's CIFAR-10 tutorial CNN (3 -> 6 -> 16 channels): channels-last under bf16 measured 50,404 vs 64,718
  // samples/s on an H100.
  RunFacts narrow_facts = facts(gpu, true, 83'000'000);
  narrow_facts.amp = config::AmpMode::kBf16;
  const FastPaths narrow = plan_fast_paths(c, narrow_facts);
  EXPECT_FALSE(narrow.channels_last);
  EXPECT_TRUE(has(narrow.decisions,
                  "train.channels_last: off (auto: convolutions with channel counts that are not "
                  "multiples of 8 ran slower channels-last)"));
  EXPECT_FALSE(plan_fast_paths(c, facts(gpu, false, 1'000)).cudnn_benchmark) << "no convolutions";
}

// cuDNN's algorithm search costs about 0.2 s a convolution, pass and shape (H200): measured a loss for the CIFAR-10
// tutorial CNN and the time-to-accuracy network, left on above plan::kCudnnSearchMacs, and as set wherever it is set.
TEST(FastPathPlan, CudnnSearchesOnlyForConvolutionsLargeEnoughToPay) {
  config::ExperimentConfig c;
  const torch::Device gpu(torch::kCUDA, 0);
  const FastPaths tta_net = plan_fast_paths(c, facts(gpu, true, 4'545'216'512));  // fashion_mnist_fast.yaml, batch 256
  EXPECT_FALSE(tta_net.cudnn_benchmark);
  EXPECT_TRUE(
      has(tta_net.decisions,
          "train.cudnn_benchmark: off (auto: a micro-batch's forward pass is 4.55 G multiply-adds, under 50 G: "
          "cuDNN's algorithm search would cost the first epoch more than it saves (measured: configs/README.md))"));
  const FastPaths large = plan_fast_paths(c, facts(gpu, true, plan::kCudnnSearchMacs));
  EXPECT_TRUE(large.cudnn_benchmark);
  EXPECT_TRUE(has(large.decisions,
                  "train.cudnn_benchmark: on (auto: a micro-batch's forward pass is 50 G multiply-adds: convolutions "
                  "large enough for cuDNN's algorithm search to pay)"));
  c.train.cudnn_benchmark = config::Switch::kOn;
  EXPECT_TRUE(plan_fast_paths(c, facts(gpu, true, 4'545'216'512)).cudnn_benchmark);
}

// Work that runs on the device is captured with the step, and the decision
// says which: clipping (clip_grad_norm), a loss weighted by class (one device
// tensor made once), the K micro-batches of a step (one replay), autocast and
// fp16's scaler (unscaled, checked and updated on the device).
TEST(FastPathPlan, DeviceWorkIsCapturedWithTheStep) {
  const torch::Device gpu(torch::kCUDA, 0);
  // The config's keys, and the plan's resolution (accumulation and amp) in the facts.
  using Setting = std::function<void(config::TrainConfig&, RunFacts&)>;
  const std::vector<std::pair<Setting, std::string>> cases{
      {[](config::TrainConfig& t, RunFacts&) { t.grad_clip = 1; }, "gradients clipped on the device"},
      {[](config::TrainConfig& t, RunFacts&) {
         t.class_weights = {1, 3};
       },
       "the class weights in a device tensor"},
      {[](config::TrainConfig&, RunFacts& f) {
         f.accumulation = 4;
         f.amp = config::AmpMode::kFp16;
       },
       "the 4 micro-batches of each step (train.accumulation_steps) in one replay, fp16 autocast and its loss "
       "scaler on the device"},
      {[](config::TrainConfig&, RunFacts& f) { f.amp = config::AmpMode::kBf16; }, "bf16 autocast"},
  };
  for (const auto& [set, captured] : cases) {
    config::ExperimentConfig c;
    RunFacts run = facts(gpu, true, 1'000);
    set(c.train, run);
    const FastPaths fast = plan_fast_paths(c, run);
    EXPECT_TRUE(fast.cuda_graph) << captured;
    EXPECT_TRUE(has(fast.decisions,
                    "train.cuda_graph: on (auto: one device, fused update, no host work inside the "
                    "step; captured with " +
                        captured + ")"))
        << fast.decisions[1];
  }
}

TEST(FastPathFacts, TensorCoreChannelsCountEveryConvolutionAfterTheFirst) {
  auto conv_facts = [](int64_t first_out, int64_t second_out) {
    torch::nn::Sequential model(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, first_out, 3)),
                                torch::nn::Conv2d(torch::nn::Conv2dOptions(first_out, second_out, 3)));
    return model_facts(model, {3, 8, 8});
  };
  EXPECT_FALSE(conv_facts(6, 16).tensor_core_channels) << "the CIFAR-10 tutorial CNN: 6 input channels";
  EXPECT_EQ(conv_facts(6, 16).image_channels, 3);
  EXPECT_TRUE(conv_facts(64, 128).tensor_core_channels) << "a ResNet's: the 3-channel image does not count";
  torch::nn::Sequential mlp(torch::nn::Linear(8, 16));
  EXPECT_FALSE(model_facts(mlp, {8}).tensor_core_channels);
  EXPECT_EQ(model_facts(mlp, {8}).image_conv_share, 1) << "no convolution reads an image";
  EXPECT_EQ(model_facts(mlp, {8}).image_channels, 0);
}

// The tutorial CNN's convolutions on Fashion-MNIST: the first (1 -> 6, 5x5 on 28x28)
// does 86,400 of the 240,000 multiply-adds; with a pool between them.
TEST(FastPathFacts, ImageConvShareIsTheFirstConvolutionsPartOfTheForwardPass) {
  torch::nn::Sequential seed_cnn(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5)), torch::nn::MaxPool2d(2),
                                 torch::nn::Conv2d(torch::nn::Conv2dOptions(6, 16, 5)));
  EXPECT_DOUBLE_EQ(model_facts(seed_cnn, {1, 28, 28}).image_conv_share, 86'400.0 / 240'000);
  torch::nn::Sequential widening(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 24, 3).padding(1)),
                                 torch::nn::Conv2d(torch::nn::Conv2dOptions(24, 64, 3).padding(1)));
  EXPECT_NEAR(model_facts(widening, {1, 28, 28}).image_conv_share, 1.0 / 65, 1e-12);
}

// The batch solver's candidates are traced for their memory, not their
// threads: only the run's plan reads the host's load (up to 20 ms a read).
TEST(FastPathFacts, RunFactsLeaveTheHostsCpusToThePlan) {
  torch::nn::Sequential mlp(torch::nn::Linear(8, 16));
  parallel::StrategyPlan single;
  single.replicas = {torch::Device(torch::kCPU)};
  EXPECT_FALSE(plan::run_facts(model_facts(mlp, {8}), single, 4, 1, config::AmpMode::kOff).cpus);
}

TEST(FastPathPlan, ASettingWinsAndForeachTurnsAutoFusedOff) {
  config::ExperimentConfig c;
  c.optim.foreach = true;
  const FastPaths foreach = plan_fast_paths(c, facts(torch::Device(torch::kCPU), false, 1'000));
  EXPECT_FALSE(foreach.fused);
  EXPECT_TRUE(has(foreach.decisions, "optim.fused: off (auto: optim.foreach is set instead)"));

  c.optim.foreach = false;
  c.optim.fused = config::Switch::kOff;
  c.train.cuda_graph = config::Switch::kOn;
  c.train.channels_last = config::Switch::kOn;
  c.train.threads = 2;
  RunFacts replicas = facts(torch::Device(torch::kCUDA, 0), true, 1'000);
  replicas.strategy = parallel::StrategyKind::kDataParallel;
  const FastPaths set = plan_fast_paths(c, replicas);
  EXPECT_FALSE(set.fused);
  EXPECT_TRUE(set.foreach) << "on CUDA the step is foreach wherever fused is off";
  EXPECT_FALSE(set.cuda_graph) << "asked for, but blocked (dp)";
  EXPECT_TRUE(set.channels_last);
  EXPECT_EQ(set.threads, 2);
  EXPECT_TRUE(has(set.decisions, "optim.fused: off (set)"));
  EXPECT_TRUE(has(set.decisions, "train.channels_last: on (set)"));
  EXPECT_TRUE(has(set.decisions, "train.threads: 2 (set)"));
}

}  // namespace
}  // namespace gputrain::train
