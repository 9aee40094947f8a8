#include "gputrain/train/cuda_graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#ifdef GPUTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/logging/format.h"
#include "gputrain/train/fast_paths.h"
#include "gputrain/train/optimizer_step.h"
#include "multi_tensor_optim.h"

namespace gputrain::train {

#ifdef GPUTRAIN_WITH_CUDA

namespace {
// Eager steps before the capture: enough for cuDNN, cuBLAS and the caching
// allocator to settle, as in PyTorch's whole-network capture example.
constexpr int64_t kWarmupSteps = 3;

// Makes `waiter` wait for the work queued on `from` so far, on the GPU.
// Through c10's generic Event: gputrain calls no CUDA runtime function itself.
void stream_waits_for(const c10::cuda::CUDAStream& waiter, const c10::cuda::CUDAStream& from) {
  c10::Event event(c10::DeviceType::CUDA);
  event.record(from.unwrap());
  event.block(waiter.unwrap());
}
// Copies made on the caller's stream: the graph's static outputs are overwritten
// by the next replay, and a side stream's tensors must not be freed under it.
StepSums on_current_stream(const StepSums& sums) {
  return {sums.loss_sum.clone(), sums.correct.defined() ? sums.correct.clone() : torch::Tensor()};
}
}  // namespace

struct GraphedStep::State {
  State(torch::nn::Sequential m, detail::SplitStep& s, LossSpec l, bool cl, torch::Device d, const GraphPlan& p,
        NonFiniteSteps* n)
      : model(std::move(m)),
        split(s),
        loss(std::move(l)),
        channels_last(cl),
        device(d),
        plan(p),
        non_finite(n),
        side(c10::cuda::getStreamFromPool(false, d.index())) {}

  torch::nn::Sequential model;
  detail::SplitStep& split;  // the fused optimizer
  LossSpec loss;
  bool channels_last;
  torch::Device device;
  GraphPlan plan;              // the captured shape, and what the step does after backward
  NonFiniteSteps* non_finite;  // null: the loss is not checked
  // Every eager step and the capture run here. One stream for the run: the
  // caching allocator keeps freed blocks per stream and cuBLAS a workspace per
  // stream, so a new pool stream per short last batch grew an H100 run's
  // memory by 64 MiB allocated and up to 1 GiB reserved every epoch.
  c10::cuda::CUDAStream side;
  int64_t eager_steps = 0;
  torch::Tensor inputs;  // static: every replayed step reads its batch from here
  torch::Tensor targets;
  StepSums sums;               // static outputs of the graph
  MeanBackward backward_mean;  // its 1/batch gradient is made before capture, in the warm-up steps
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  bool eager_only = false;  // the step could not be captured: every step runs eagerly

  // Gives up on the graph for the rest of the run, saying why.
  void fall_back(const std::string& why) {
    eager_only = true;
    spdlog::warn("train.cuda_graph: off from here on because {}; steps run eagerly", why);
  }

  // The device work of one step on `x` and `y`; the host half (prepare_step) runs outside.
  StepSums body(const torch::Tensor& x, const torch::Tensor& y) {
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) p.grad().zero_();  // in place: the graph keeps the gradients' addresses
    }
    torch::Tensor outputs;
    torch::Tensor total;
    {
      device::NvtxRange range("forward");
      outputs = model->forward(model_inputs(x, device, channels_last));
      total = loss_sum(loss, outputs, y);
    }
    {
      device::NvtxRange range("backward");
      backward_mean(total, x.size(0));
    }
    const torch::Tensor correct = correct_count(outputs, y, loss.classes > 0);
    if (non_finite == nullptr) return {total.detach(), correct};
    non_finite->check(total);  // on the device: the update that follows reads its found()
    return {non_finite->kept(total.detach()), non_finite->kept(correct)};
  }

  void launch() {
    device::NvtxRange range("optimizer");
    if (plan.grad_clip > 0) clip_grad_norm(model->parameters(), plan.grad_clip);  // device only: no host read
    split.launch_step();
  }

  // One step run eagerly on a side stream, as the warm-up before a capture
  // must. It zeroes and fills the same gradient tensors the graph replays, and
  // the fused update reads the same state, so eager and replayed steps mix.
  // `prepared`: prepare_step() already ran for this step.
  StepSums eager_step(const torch::Tensor& x, const torch::Tensor& y, bool prepared = false) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
    stream_waits_for(side, current);
    StepSums step_sums;
    {
      const c10::StreamGuard guard(side.unwrap());
      step_sums = body(x, y);
      if (!prepared) split.prepare_step();
      launch();
    }
    stream_waits_for(current, side);
    return step_sums;
  }

  void capture() {
    c10::cuda::device_synchronize();  // as torch.cuda.graph does before capturing
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
    stream_waits_for(side, current);
    graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      const c10::StreamGuard guard(side.unwrap());
      // Thread-local mode: the loader's worker threads keep allocating pinned
      // memory (cudaHostAlloc, event queries) while this thread captures,
      // which the default global mode forbids process-wide.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      sums = body(inputs, targets);
      launch();
      graph->capture_end();
    }
    stream_waits_for(current, side);
    spdlog::info("train.cuda_graph: captured the train step (input {}); later steps replay it",
                 logging::shape_str(inputs));
  }
};

GraphedStep::GraphedStep(torch::nn::Sequential model, torch::optim::Optimizer& optimizer, const LossSpec& loss,
                         bool channels_last, torch::Device device, const GraphPlan& plan, NonFiniteSteps* non_finite) {
  auto* split = dynamic_cast<detail::SplitStep*>(&optimizer);
  GPUTRAIN_CHECK(split != nullptr && device.is_cuda(), "GraphedStep needs a fused optimizer on CUDA");
  // The captured loss reads the class weights at this address on every replay: made once, never written.
  GPUTRAIN_CHECK(!loss.class_weights.defined() || loss.class_weights.device() == device,
                 "GraphedStep needs the class weights on {} (got {})", device.str(), loss.class_weights.device().str());
  state_ = std::make_unique<State>(std::move(model), *split, loss, channels_last, device, plan, non_finite);
}

GraphedStep::~GraphedStep() = default;

StepSums GraphedStep::step(const data::Batch& batch) {
  State& s = *state_;
  const c10::DeviceGuard device_guard(s.device);
  if (batch.size() != s.plan.micro_batch) {
    // The epoch's short last batch: the graph replays one shape, so this one runs eagerly.
    device::NvtxRange range("step (eager, other shape)");
    return on_current_stream(s.eager_step(batch.inputs.to(s.device, /*non_blocking=*/true),
                                          batch.targets.to(s.device, /*non_blocking=*/true)));
  }
  if (!s.inputs.defined()) {
    s.inputs = torch::empty(batch.inputs.sizes(), batch.inputs.options().device(s.device).pinned_memory(false));
    s.targets = torch::empty(batch.targets.sizes(), batch.targets.options().device(s.device).pinned_memory(false));
  }
  {
    device::NvtxRange range("data");
    s.inputs.copy_(batch.inputs, /*non_blocking=*/true);
    s.targets.copy_(batch.targets, /*non_blocking=*/true);
  }
  if (s.eager_steps < kWarmupSteps || s.eager_only) {
    ++s.eager_steps;
    return on_current_stream(s.eager_step(s.inputs, s.targets));
  }
  if (!s.graph) {
    const std::vector<std::string> missing = parameters_without_gradient(*s.model);
    if (!missing.empty()) {
      s.fall_back(fmt::format("{} got no gradient in the {} warm-up steps (a layer the loss does not reach): {}",
                              count_of(static_cast<int64_t>(missing.size()), "parameter"), kWarmupSteps,
                              fmt::join(missing, ", ")));
      return on_current_stream(s.eager_step(s.inputs, s.targets));
    }
  }
  // Host half of this step: learning rate and step counts into the tensors the graph reads.
  const bool replayable = s.split.prepare_step();
  if (!replayable && !s.graph) {
    s.fall_back("the optimizer's update reads a per-step value from the host (parameters with different step counts)");
    return on_current_stream(s.eager_step(s.inputs, s.targets, /*prepared=*/true));
  }
  GPUTRAIN_CHECK(replayable, "train.cuda_graph: the captured optimizer step can no longer be replayed");
  if (!s.graph) s.capture();
  {
    device::NvtxRange range("step (graph)");
    s.graph->replay();
  }
  return on_current_stream(s.sums);
}

#else

struct GraphedStep::State {};

GraphedStep::GraphedStep(torch::nn::Sequential, torch::optim::Optimizer&, const LossSpec&, bool, torch::Device,
                         const GraphPlan&, NonFiniteSteps*) {
  GPUTRAIN_CHECK(false, "GraphedStep needs a build of LibTorch with CUDA");
}

GraphedStep::~GraphedStep() = default;

StepSums GraphedStep::step(const data::Batch&) { return {}; }

#endif

std::vector<std::string> parameters_without_gradient(const torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) {
    if (p.value().requires_grad() && !p.value().grad().defined()) names.push_back(p.key());
  }
  return names;
}

}  // namespace gputrain::train
