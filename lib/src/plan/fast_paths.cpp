#include "gputrain/plan/fast_paths.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "gputrain/models/factory.h"
#include "gputrain/step/backends.h"

namespace gputrain::plan {

MatmulPrecisionPlan resolve_matmul_precision(config::MatmulPrecision setting, const torch::Device& device) {
  if (setting != config::MatmulPrecision::kAuto) return {config::word(setting), "train.matmul_precision"};
  if (device.is_cuda()) return {"high", "auto: TF32 matmuls on CUDA, as cuDNN's convolutions already use"};
  return {"highest", fmt::format("auto: full float32 on {}", device.str())};
}

namespace {

const char* on_off(bool on) { return on ? "on" : "off"; }

// A switch's value: as set, or `rule` (its value and why) under auto.
struct Choice {
  bool on;
  std::string why;
};
Choice decide(config::Switch setting, const Choice& rule) {
  if (setting == config::Switch::kAuto) return {rule.on, "auto: " + rule.why};
  return {setting == config::Switch::kOn, "set"};
}

// What the captured step does besides forward, backward and the update,
// for the decision's log line: each was once a reason the graph was off.
std::string captured_extras(const config::TrainConfig& t, const RunFacts& facts) {
  std::vector<std::string> extras;
  if (facts.strategy == parallel::StrategyKind::kDistributed) extras.push_back("the gradients' all-reduce over NCCL");
  if (facts.accumulation > 1) {
    extras.push_back(
        fmt::format("the {} micro-batches of each step (train.accumulation_steps) in one replay", facts.accumulation));
  }
  if (facts.amp == config::AmpMode::kBf16) extras.push_back("bf16 autocast");
  if (facts.amp == config::AmpMode::kFp16) extras.push_back("fp16 autocast and its loss scaler on the device");
  if (t.grad_clip > 0) extras.push_back("gradients clipped on the device");
  if (!t.class_weights.empty()) extras.push_back("the class weights in a device tensor");
  return extras.empty() ? "" : fmt::format("; captured with {}", fmt::join(extras, ", "));
}

}  // namespace

ModelFacts model_facts(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape) {
  ModelFacts facts;
  facts.parameters = models::parameter_count(*model);
  int64_t convolutions = 0;
  bool widths_fit = true;
  for (const auto& p : model->parameters()) {
    if (p.dim() != 4 || convolutions++ == 0) continue;  // weights [out, in, kh, kw]; the first reads the image
    widths_fit = widths_fit && p.size(0) % 8 == 0 && p.size(1) % 8 == 0;
  }
  facts.convolutional = convolutions > 0;
  facts.tensor_core_channels = facts.convolutional && widths_fit;
  facts.image_channels = sample_shape.size() == 3 ? sample_shape.front() : 0;
  const std::vector<models::LayerRow> rows = models::trace_layers(model, sample_shape);
  const int64_t macs = models::forward_macs(rows);
  int64_t image_conv_macs = -1;
  for (const models::LayerRow& row : rows) {
    if (row.module.rfind("Conv2d", 0) == 0) {
      image_conv_macs = row.macs;
      break;
    }
  }
  facts.sample_macs = macs;
  facts.image_conv_share = macs > 0 && image_conv_macs >= 0 ? static_cast<double>(image_conv_macs) / macs : 1;
  return facts;
}

RunFacts run_facts(const ModelFacts& model, const parallel::StrategyPlan& strategy, int64_t micro_batch,
                   int64_t accumulation, config::AmpMode amp) {
  RunFacts facts;
  facts.device = strategy.replicas.front();
  facts.strategy = strategy.kind;
  facts.nccl = strategy.backend == config::DdpBackend::kNccl;
  facts.model = model;
  facts.micro_batch = micro_batch;
  facts.accumulation = accumulation;
  facts.amp = amp;
  return facts;
}

std::string cuda_graph_blocker(const RunFacts& facts) {
#ifndef GPUTRAIN_WITH_CUDA
  return "this build of LibTorch has no CUDA";
#endif
  if (!facts.device.is_cuda()) return fmt::format("it needs CUDA and the run is on {}", facts.device.str());
  if (facts.strategy == parallel::StrategyKind::kDataParallel) {
    return "strategy: dp steps its replicas on host threads (ddp, one process per GPU, is captured)";
  }
  if (facts.strategy == parallel::StrategyKind::kDistributed && !facts.nccl) {
    return "ddp over gloo sums the gradients through the host (over NCCL the all-reduce is captured)";
  }
  return "";
}

FastPaths plan_fast_paths(const config::ExperimentConfig& c, const RunFacts& facts) {
  FastPaths fast;
  fast.matmul_precision = resolve_matmul_precision(c.train.matmul_precision, facts.device);
  const bool cuda = facts.device.is_cuda();
  const std::string device_name = facts.device.str();
  auto record = [&](const char* key, bool value, const std::string& why) {
    fast.decisions.push_back(fmt::format("{}: {} ({})", key, on_off(value), why));
  };

  const Choice fused = decide(
      c.optim.fused, c.optim.foreach ? Choice{false, "optim.foreach is set instead"}
                                     : Choice{true, fmt::format("fused {} kernel available for {}",
                                                                config::word(c.optim.name), cuda ? "cuda" : "cpu")});
  fast.fused = fused.on;
  record("optim.fused", fast.fused, fused.why);
  if (!fast.fused) {
    // PyTorch's optimizers step with foreach kernels on CUDA unless told
    // otherwise; this one also reads its learning rate from the device.
    fast.foreach = c.optim.foreach || cuda;
    record("optim.foreach", fast.foreach,
           c.optim.foreach ? "set"
           : cuda          ? "auto: optim.fused is off; multi-tensor kernels on CUDA, as PyTorch's default"
                           : "auto: optim.fused is off; LibTorch's own step on the CPU");
  }

  const std::string blocker = cuda_graph_blocker(facts);
  const Choice graph =
      decide(c.train.cuda_graph, blocker.empty()
                                     ? Choice{true, fmt::format("one device, {} update, no host work inside the step",
                                                                fast.fused ? "fused" : "foreach")}
                                     : Choice{false, blocker});
  fast.cuda_graph = graph.on && blocker.empty();
  if (graph.on && !blocker.empty()) {
    spdlog::warn("train.cuda_graph: off because {}; steps run eagerly", blocker);
    record("train.cuda_graph", false, "set, but " + blocker);
  } else {
    record("train.cuda_graph", fast.cuda_graph, graph.why + (fast.cuda_graph ? captured_extras(c.train, facts) : ""));
  }

  const bool mixed = facts.amp != config::AmpMode::kOff;
  const Choice layout = decide(
      c.train.channels_last,
      !facts.model.convolutional ? Choice{false, "the model has no convolutions"}
      : !cuda && facts.model.image_channels >= 3
          ? Choice{true, fmt::format("oneDNN's channels-last convolutions on {}-channel images (measured faster)",
                                     facts.model.image_channels)}
      : !cuda && facts.model.image_conv_share < kImageConvShareForChannelsLast
          ? Choice{true, fmt::format("the convolution reading the {}-channel images is {:.1f}% of the work; the rest "
                                     "runs faster channels-last on {} (measured)",
                                     facts.model.image_channels, 100 * facts.model.image_conv_share, device_name)}
      : !cuda
          ? Choice{false, fmt::format("single-channel images ran slower channels-last on {} (measured)", device_name)}
      : !mixed ? Choice{false, "tensor cores take channels-last convolutions under train.amp only"}
      : !facts.model.tensor_core_channels
          ? Choice{false, "convolutions with channel counts that are not multiples of 8 ran slower channels-last"}
          : Choice{true, "convolutions under train.amp on tensor cores"});
  fast.channels_last = layout.on;
  record("train.channels_last", fast.channels_last, layout.why);

  const double search_gmacs = static_cast<double>(kCudnnSearchMacs) / 1e9;
  const double micro_batch_gmacs = static_cast<double>(facts.micro_batch_macs()) / 1e9;
  const Choice cudnn = decide(
      c.train.cudnn_benchmark,
      !cuda                        ? Choice{false, fmt::format("cuDNN does not run on {}", device_name)}
      : !facts.model.convolutional ? Choice{false, "the model has no convolutions"}
      : micro_batch_gmacs < search_gmacs
          ? Choice{false, fmt::format("a micro-batch's forward pass is {:.2f} G multiply-adds, under {:.0f} G: "
                                      "cuDNN's algorithm search would cost the first epoch more than it saves "
                                      "(measured: configs/README.md)",
                                      micro_batch_gmacs, search_gmacs)}
          : Choice{true, fmt::format("a micro-batch's forward pass is {:.0f} G multiply-adds: convolutions large "
                                     "enough for cuDNN's algorithm search to pay",
                                     micro_batch_gmacs)});
  fast.cudnn_benchmark = cudnn.on;
  record("train.cudnn_benchmark", fast.cudnn_benchmark, cudnn.why);

  if (c.train.threads) {
    fast.threads = *c.train.threads;
    fast.decisions.push_back(fast.threads > 0 ? fmt::format("train.threads: {} (set)", fast.threads)
                                              : std::string("train.threads: LibTorch's default (set)"));
  } else if (cuda) {
    fast.decisions.push_back("train.threads: LibTorch's default (auto: the steps run on CUDA)");
  } else if (facts.micro_batch_macs() < kSmallModelMacs) {
    fast.threads = 1;
    fast.decisions.push_back(fmt::format(
        "train.threads: 1 (auto: a micro-batch's forward pass is {:.2f} M multiply-adds, under {:.0f} M, too small "
        "to share between threads)",
        static_cast<double>(facts.micro_batch_macs()) / 1e6, static_cast<double>(kSmallModelMacs) / 1e6));
  } else if (facts.cpus) {
    const device::ThreadChoice share = device::choose_threads(*facts.cpus, step::libtorch_default_threads());
    fast.threads = share.threads;
    fast.decisions.push_back(fmt::format("train.threads: {} (auto: {})", share.threads, share.why));
  } else {
    fast.decisions.push_back(
        fmt::format("train.threads: LibTorch's default (auto: a micro-batch's forward pass is {:.1f} M multiply-adds)",
                    static_cast<double>(facts.micro_batch_macs()) / 1e6));
  }
  return fast;
}

config::OptimConfig resolved_optim(const config::OptimConfig& config, const FastPaths& fast) {
  config::OptimConfig resolved = config;
  resolved.fused = fast.fused ? config::Switch::kOn : config::Switch::kOff;
  resolved.foreach = fast.foreach;
  return resolved;
}

}  // namespace gputrain::plan
