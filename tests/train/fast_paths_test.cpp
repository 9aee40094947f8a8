// The fast paths in short CPU runs of the trainer: each trains like the
// default path (exactly, or within rounding), and `bench` reports every phase.
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "gputrain/config/load.h"
#include "gputrain/data/generate.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/train/bench.h"
#include "gputrain/train/fast_paths.h"
#include "gputrain/train/trainer.h"
#include "support/temp_dir.h"

namespace gputrain::train {
namespace {

using gputrain::testing::TempDir;

struct Quiet : TrainObserver {};

// A few CIFAR-format images, written once for every test here.
class FastPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fast-paths");
    data::write_cifar10_set(dir_->path(), {40, 16, 2});
  }
  static void TearDownTestSuite() { delete dir_; }

  // The seed CNN with normalisation, crop and flip, one epoch of 40 images.
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

  static std::vector<torch::Tensor> trained(const config::LoadedConfig& loaded,
                                            const device::DevicePlan& devices = {}) {
    Trainer trainer(loaded, devices);
    Quiet quiet;
    trainer.fit(quiet);
    std::vector<torch::Tensor> params;
    for (const auto& p : trainer.model()->parameters()) params.push_back(p.detach().cpu().contiguous());
    return params;
  }

  static inline TempDir* dir_ = nullptr;
};

void expect_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, double tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(tolerance == 0 ? torch::equal(a[i], b[i]) : torch::allclose(a[i], b[i], tolerance, tolerance))
        << "parameter " << i << ": max difference " << (a[i] - b[i]).abs().max().item<double>();
  }
}

TEST_F(FastPaths, DeviceLoaderTrainsExactlyLikeTheHostLoader) {
  expect_equal(trained(cifar({"data.device_cache=true"})), trained(cifar({})), 0);
}

TEST_F(FastPaths, ChannelsLastTrainsLikeContiguous) {
  expect_equal(trained(cifar({"train.channels_last=true"})), trained(cifar({})), 1e-4);
}

TEST_F(FastPaths, ForeachAndFusedOptimizersTrainLikeTheLoop) {
  const auto plain = trained(cifar({}));
  expect_equal(trained(cifar({"optim.foreach=true"})), plain, 1e-4);
  expect_equal(trained(cifar({"optim.fused=true"})), plain, 1e-4);
}

TEST_F(FastPaths, CudaGraphOffCudaFallsBackToEagerSteps) {
  expect_equal(trained(cifar({"train.cuda_graph=true", "optim.fused=true", "train.cudnn_benchmark=true"})),
               trained(cifar({"optim.fused=true"})), 0);
}

TEST_F(FastPaths, BenchTimesEveryPhaseAndTheComputeBound) {
  const BenchReport r = run_bench(cifar({"data.device_cache=true"}), {}, {3, 1});
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
}

// The graph replays what eager steps compute: same weights after an epoch.
TEST_F(FastPaths, CudaGraphTrainsLikeEagerSteps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto on_gpu = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"device=cuda", "optim.fused=true", "data.drop_last=true", "train.epochs=4"});
    const auto loaded = cifar(overrides);
    return trained(loaded, device::resolve_devices(loaded, device::probe_devices(std::nullopt)));
  };
  expect_equal(on_gpu({"train.cuda_graph=true"}), on_gpu({}), 1e-4);
}

TEST(MatmulPrecision, AutoIsTf32OnCudaAndFullFloat32Elsewhere) {
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kAuto, torch::Device(torch::kCUDA, 0)).value, "high");
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kAuto, torch::Device(torch::kCPU)).value, "highest");
  EXPECT_EQ(resolve_matmul_precision(config::MatmulPrecision::kMedium, torch::Device(torch::kCPU)).value, "medium");
  configure_backends(config::TrainConfig{}, torch::Device(torch::kCPU));
  EXPECT_EQ(at::globalContext().float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
  config::TrainConfig high;
  high.matmul_precision = config::MatmulPrecision::kHigh;
  configure_backends(high, torch::Device(torch::kCPU));
  EXPECT_EQ(at::globalContext().float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  configure_backends(config::TrainConfig{}, torch::Device(torch::kCPU));
}

}  // namespace
}  // namespace gputrain::train
