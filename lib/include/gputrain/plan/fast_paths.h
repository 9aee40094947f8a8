#pragma once
// The switches that change how a step runs, not what it computes
// (optim.fused, train.cuda_graph, train.channels_last, train.cudnn_benchmark,
// train.threads, train.matmul_precision), each `auto` by default and decided
// here by a written rule; data.device_cache is decided by the loader
// (data/batch_loader.h); step/backends.h applies the process-wide ones. The measurements behind the rules are in
// configs/README.md.
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/device/cpu_share.h"
#include "gputrain/parallel/strategy.h"

namespace gputrain::plan {

// Below this many multiply-adds in one micro-batch's forward pass, a CPU step
// is per-op overhead, and a second intra-op thread only adds synchronisation.
// Measured on the 2-core VM: at 0.18 M one thread ran 2.0x faster, at 2.9 M
// two threads 1.1x faster (configs/README.md).
inline constexpr int64_t kSmallModelMacs = 1'000'000;

// On the CPU, images of fewer than 3 channels go channels-last only when the
// convolution reading them is under this share of the forward pass: the seed
// Fashion-MNIST CNN (36% of its convolutions' work) ran slower channels-last,
// configs/fashion_mnist_fast.yaml's residual network (1%) 1.19x faster (configs/README.md).
inline constexpr double kImageConvShareForChannelsLast = 0.1;

// cuDNN's benchmark mode searches algorithms for every convolution, pass and
// input shape; on an H200 that took about 0.2 s a search (8.7 s for the
// Fashion-MNIST time-to-accuracy network, whose steady speed it left where it
// was: 122,521 vs 122,057 samples/s), and on an H100 0.53 s for the CIFAR-10 tutorial
// CNN, which it made at most 0.013 s an epoch faster. Below this many
// multiply-adds in a micro-batch's forward pass (those two: 4.5 G and 0.08 G)
// a run pays for the search without earning it back (configs/README.md). The
// bound itself is not yet measured: larger networks are left to cuDNN's
// search, as PyTorch's users set it.
inline constexpr int64_t kCudnnSearchMacs = 50'000'000'000;

// What the rules need from the model: the same on every device, so traced
// once, on the CPU, by the plan.
struct ModelFacts {
  int64_t parameters = 0;
  bool convolutional = false;  // the model has 4-D weights
  // Every convolution after the first (which reads the image's 1 or 3
  // channels) has channel counts in and out that are multiples of 8, the
  // layout tensor cores take in fp16/bf16.
  bool tensor_core_channels = false;
  int64_t image_channels = 0;  // the channels of [C, H, W] samples; 0 for other shapes
  // The convolution that reads the image: its share of one sample's forward
  // multiply-adds (oneDNN runs a 1-channel convolution slowly channels-last).
  double image_conv_share = 1;
  int64_t sample_macs = 0;  // multiply-adds of one sample's forward pass
  // A batchnorm layer training on one value per channel of a sample
  // (models::batchnorm_of_single_values): no training forward pass may have 1 row; "" = none.
  std::string single_value_batchnorm;
};

// `model`'s facts, traced with one zero sample of `sample_shape` on its device.
ModelFacts model_facts(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape);

// What the auto rules decide from: the model's facts where and how it runs.
struct RunFacts {
  torch::Device device{torch::kCPU};
  // How the run is spread: one device, dp's replica threads, or ddp's
  // processes, whose collectives a CUDA graph captures over NCCL only.
  parallel::StrategyKind strategy = parallel::StrategyKind::kSingle;
  bool nccl = false;
  ModelFacts model;
  int64_t micro_batch = 0;
  int64_t accumulation = 1;                     // micro-batches per optimizer step, as the plan resolved them
  config::AmpMode amp = config::AmpMode::kOff;  // train.amp as the plan resolved it
  // The host's CPUs as this process sees them (device::read_cpu_share), read
  // by the run's plan only; unread (the step-memory probe, tests): a model big
  // enough for several threads keeps LibTorch's default.
  std::optional<device::CpuShare> cpus;

  int64_t micro_batch_macs() const { return model.sample_macs * micro_batch; }
};

// The facts of `model` run by `strategy` (on its first device) in
// micro-batches of `micro_batch`, `accumulation` a step, under `amp`; the
// host's CPUs unread.
RunFacts run_facts(const ModelFacts& model, const parallel::StrategyPlan& strategy, int64_t micro_batch,
                   int64_t accumulation, config::AmpMode amp);

// train.matmul_precision resolved for `device`, with why.
struct MatmulPrecisionPlan {
  std::string value;   // highest | high | medium, as at::Context takes it
  std::string reason;  // for the log
};
MatmulPrecisionPlan resolve_matmul_precision(config::MatmulPrecision setting, const torch::Device& device);

// Every fast path resolved to on or off, and a log line per key saying which
// and why ("optim.fused: on (auto: ...)").
struct FastPaths {
  bool fused = false;
  bool foreach = false;  // the foreach step: set, or on CUDA wherever fused is off
  bool cuda_graph = false;
  bool channels_last = false;
  bool cudnn_benchmark = false;
  int64_t threads = 0;  // 0: LibTorch's default
  MatmulPrecisionPlan matmul_precision;
  std::vector<std::string> decisions;
};
FastPaths plan_fast_paths(const config::ExperimentConfig& config, const RunFacts& facts);

// What a run with train.cuda_graph needs: CUDA, one device per process
// (strategy single, or ddp over NCCL, whose all-reduce is captured). The
// optimizer step is then always multi-tensor (fused, or foreach: plan_fast_paths
// turns foreach on wherever fused is off on CUDA), reading its learning rate
// from the device. Accumulation, amp (fp16's
// scaler works on the device) and clipping are device work and are captured;
// so is a loss weighted by class, whose weights are one device tensor made
// before the run. A group of another shape (an epoch's last) runs eagerly.
// Returns why the graph cannot be used, or "".
std::string cuda_graph_blocker(const RunFacts& facts);

// optim.fused resolved: the optimizer's config as make_optimizer takes it.
config::OptimConfig resolved_optim(const config::OptimConfig& config, const FastPaths& fast);

}  // namespace gputrain::plan
