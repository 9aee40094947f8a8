#include "gputrain/step/cuda_graph.h"

#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

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
#include "gputrain/config/choices.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/optim/multi_tensor.h"
#include "gputrain/step/channels_last.h"
#include "gputrain/step/optimizer_step.h"

namespace gputrain::step {

bool GraphPlan::replays(const std::vector<data::Batch>& group) const {
  return static_cast<int64_t>(group.size()) == micro_batches &&
         std::all_of(group.begin(), group.end(),
                     [&](const data::Batch& mb) { return mb.global_size() == micro_batch; });
}

std::vector<int64_t> GraphPlan::buffer_shape(const torch::Tensor& part) const {
  GPUTRAIN_CHECK(part.dim() >= 1, "a micro-batch tensor has a batch dimension (got a 0-dim tensor)");
  std::vector<int64_t> shape = part.sizes().vec();
  shape.front() *= micro_batches;
  return shape;
}

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
std::vector<StepSums> on_current_stream(const std::vector<StepSums>& sums) {
  std::vector<StepSums> copies;
  for (const StepSums& s : sums) {
    copies.push_back({s.loss_sum.clone(), s.correct.defined() ? s.correct.clone() : torch::Tensor()});
  }
  return copies;
}
}  // namespace

struct GraphedStep::State {
  State(torch::nn::Sequential m, optim::detail::SplitStep& s, optim::LossSpec l, bool cl, torch::Device d,
        const GraphPlan& p, NonFiniteSteps* n, GradScaler* g, parallel::Strategy* ps)
      : model(std::move(m)),
        split(s),
        loss(std::move(l)),
        channels_last(cl),
        device(d),
        plan(p),
        non_finite(n),
        scaler(g != nullptr && g->enabled() ? g : nullptr),
        processes(ps),
        side(c10::cuda::getStreamFromPool(false, d.index())) {}

  torch::nn::Sequential model;
  optim::detail::SplitStep& split;  // the fused or foreach optimizer
  optim::LossSpec loss;
  bool channels_last;
  torch::Device device;
  GraphPlan plan;                 // the captured shape, and what the step does after backward
  NonFiniteSteps* non_finite;     // null: the loss is not checked
  GradScaler* scaler;             // null: no loss scaling (fp16 only)
  parallel::Strategy* processes;  // null: one process
  // Every eager step and the capture run here. One stream for the run: the
  // caching allocator keeps freed blocks per stream and cuBLAS a workspace per
  // stream, so a new pool stream per short last batch grew an H100 run's
  // memory by 64 MiB allocated and up to 1 GiB reserved every epoch.
  c10::cuda::CUDAStream side;
  int64_t eager_steps = 0;
  // From the first warm-up step to the capture: what the first epoch pays before it runs at speed.
  std::chrono::steady_clock::time_point warmup_start;
  bool timed_other_shape = false;  // the first step of another shape was timed and logged
  // Static: every replayed step reads its micro-batches from here, micro-batch k from slice k.
  torch::Tensor inputs, targets;
  std::vector<torch::Tensor> input_parts, target_parts;
  std::vector<StepSums> sums;         // static outputs of the graph, one per micro-batch
  optim::MeanBackward backward_mean;  // its 1/samples gradient is made before capture, in the warm-up steps
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  bool eager_only = false;  // the step could not be captured: every step runs eagerly

  // Gives up on the graph for the rest of the run, saying why.
  void fall_back(const std::string& why) {
    eager_only = true;
    spdlog::warn("train.cuda_graph: off from here on because {}; steps run eagerly", why);
  }

  // Whether this process's rows of `group` fit the static buffer (allocated
  // on the first full group, or not yet): under ddp a rank's share of a full
  // micro-batch is always the same.
  bool fits(const std::vector<data::Batch>& group) const {
    return input_parts.empty() || std::all_of(group.begin(), group.end(), [&](const data::Batch& mb) {
             return mb.size() == input_parts.front().size(0);
           });
  }

  void allocate(const data::Batch& like) {
    const auto on_device = [&](const torch::Tensor& part) {
      return torch::empty(plan.buffer_shape(part), part.options().device(device).pinned_memory(false));
    };
    inputs = on_device(like.inputs);
    targets = on_device(like.targets);
    const int64_t rows = like.size();
    for (int64_t k = 0; k < plan.micro_batches; ++k) {
      input_parts.push_back(inputs.narrow(0, k * rows, rows));
      target_parts.push_back(targets.narrow(0, k * rows, rows));
    }
  }

  // The device work of one step on micro-batches `xs` and `ys` (this
  // process's rows), their gradients summed as one batch of `samples` (over
  // every process), as the eager step does; the host half (prepare_step) runs outside.
  std::vector<StepSums> body(const std::vector<torch::Tensor>& xs, const std::vector<torch::Tensor>& ys,
                             int64_t samples) {
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) p.grad().zero_();  // in place: the graph keeps the gradients' addresses
    }
    std::vector<StepSums> step_sums;
    torch::Tensor step_loss;
    for (std::size_t k = 0; k < xs.size(); ++k) {
      torch::Tensor outputs;
      torch::Tensor total;
      {
        device::NvtxRange range("forward");
        AutocastScope autocast(plan.amp, c10::kCUDA, /*cache_casts=*/false);
        outputs = model->forward(model_inputs(xs[k], device, channels_last));
        total = optim::loss_sum(loss, outputs, ys[k]);
      }
      {
        device::NvtxRange range("backward");
        backward_mean(scaler != nullptr ? scaler->scale(total) : total, samples);
      }
      step_sums.push_back({total.detach(), optim::correct_count(outputs, ys[k], loss.classes > 0)});
      step_loss = step_loss.defined() ? step_loss + step_sums.back().loss_sum : step_sums.back().loss_sum;
    }
    if (processes != nullptr) processes->sum_gradients(model);
    if (non_finite == nullptr) return step_sums;
    // On the device (under ddp the ranks' maximum, on the stream): the update that follows reads its found().
    non_finite->check(step_loss, [&](torch::Tensor& found) {
      if (processes != nullptr) processes->max_across_processes(found);
    });
    for (StepSums& s : step_sums) s = {non_finite->kept(s.loss_sum), non_finite->kept(s.correct)};
    return step_sums;
  }

  void launch() {
    device::NvtxRange range("optimizer");
    // fp16: unscaled and checked on the device; the fused update skips on the scaler's flag.
    if (scaler != nullptr) split.skip_when(scaler->unscale_for_fused_step(model->parameters()));
    if (plan.grad_clip > 0) clip_grad_norm(model->parameters(), plan.grad_clip);  // device only: no host read
    split.launch_step();
    if (scaler != nullptr) scaler->update();
  }

  // One step run eagerly on a side stream, as the warm-up before a capture
  // must. It zeroes and fills the same gradient tensors the graph replays, and
  // the fused update reads the same state, so eager and replayed steps mix.
  // `prepared`: prepare_step() already ran for this step.
  std::vector<StepSums> eager_step(const std::vector<torch::Tensor>& xs, const std::vector<torch::Tensor>& ys,
                                   int64_t samples, bool prepared = false) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
    stream_waits_for(side, current);
    std::vector<StepSums> step_sums;
    {
      const c10::StreamGuard guard(side.unwrap());
      step_sums = body(xs, ys, samples);
      if (!prepared) split.prepare_step();
      launch();
    }
    stream_waits_for(current, side);
    return step_sums;
  }

  void capture() {
    c10::cuda::device_synchronize();  // as torch.cuda.graph does before capturing
    const auto capture_start = std::chrono::steady_clock::now();
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device.index());
    stream_waits_for(side, current);
    graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      const c10::StreamGuard guard(side.unwrap());
      // Thread-local mode: the loader's worker threads keep allocating pinned
      // memory (cudaHostAlloc, event queries) while this thread captures,
      // which the default global mode forbids process-wide.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      sums = body(input_parts, target_parts, plan.micro_batch * plan.micro_batches);
      launch();
      graph->capture_end();
    }
    stream_waits_for(current, side);
    spdlog::info("train.cuda_graph: captured the train step ({} of input {}{}); later steps replay it",
                 count_of(plan.micro_batches, "micro-batch"), c10::str(input_parts.front().sizes()),
                 plan.amp == AmpMode::kOff ? "" : fmt::format(", train.amp: {}", config::word(plan.amp)));
    spdlog::info(
        "train.cuda_graph: warm-up {:.2f} s ({} eager, cuDNN's algorithm search and first kernel loads "
        "among them), capture {:.3f} s",
        seconds_between(warmup_start, capture_start), count_of(eager_steps, "step"),
        seconds_between(capture_start, std::chrono::steady_clock::now()));
  }

  // The first step of a shape the graph does not replay (the epoch's short last batch), timed once with the
  // device waited for on both sides: its cuDNN algorithm search is part of the first epoch's extra time.
  std::vector<StepSums> timed_other_shape_step(const std::vector<torch::Tensor>& xs,
                                               const std::vector<torch::Tensor>& ys, int64_t samples) {
    c10::cuda::device_synchronize();
    const auto start = std::chrono::steady_clock::now();
    std::vector<StepSums> step_sums = eager_step(xs, ys, samples);
    c10::cuda::device_synchronize();
    timed_other_shape = true;
    spdlog::info("train.cuda_graph: a group of another shape (input {}) steps eagerly; its first step took {:.3f} s",
                 c10::str(xs.front().sizes()), seconds_between(start, std::chrono::steady_clock::now()));
    return step_sums;
  }

  static double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  }
};

GraphedStep::GraphedStep(torch::nn::Sequential model, torch::optim::Optimizer& optimizer, const optim::LossSpec& loss,
                         bool channels_last, torch::Device device, const GraphPlan& plan, NonFiniteSteps* non_finite,
                         GradScaler* scaler, parallel::Strategy* processes) {
  auto* split = dynamic_cast<optim::detail::SplitStep*>(&optimizer);
  GPUTRAIN_CHECK(split != nullptr && device.is_cuda(), "GraphedStep needs a fused or foreach optimizer on CUDA");
  // The captured loss reads the class weights at this address on every replay: made once, never written.
  GPUTRAIN_CHECK(!loss.class_weights.defined() || loss.class_weights.device() == device,
                 "GraphedStep needs the class weights on {} (got {})", device.str(), loss.class_weights.device().str());
  GPUTRAIN_CHECK(plan.micro_batch > 0 && plan.micro_batches > 0, "GraphedStep needs a plan with micro-batches");
  GPUTRAIN_CHECK(scaler == nullptr || !scaler->enabled() || non_finite == nullptr,
                 "GraphedStep: fp16's scaler skips non-finite steps itself; give it no NonFiniteSteps");
  state_ = std::make_unique<State>(std::move(model), *split, loss, channels_last, device, plan, non_finite, scaler,
                                   processes);
}

GraphedStep::~GraphedStep() = default;

std::vector<StepSums> GraphedStep::step(const std::vector<data::Batch>& group) {
  State& s = *state_;
  const c10::DeviceGuard device_guard(s.device);
  int64_t samples = 0;
  for (const data::Batch& mb : group) samples += mb.global_size();
  if (!s.plan.replays(group) || !s.fits(group)) {
    // The epoch's last group (fewer micro-batches, or a short last one): the
    // graph replays one shape, so this one runs eagerly.
    device::NvtxRange range("step (eager, other shape)");
    std::vector<torch::Tensor> xs, ys;
    for (const data::Batch& mb : group) {
      xs.push_back(mb.inputs.to(s.device, /*non_blocking=*/true));
      ys.push_back(mb.targets.to(s.device, /*non_blocking=*/true));
    }
    if (!s.timed_other_shape) return on_current_stream(s.timed_other_shape_step(xs, ys, samples));
    return on_current_stream(s.eager_step(xs, ys, samples));
  }
  if (!s.inputs.defined()) s.allocate(group.front());
  {
    device::NvtxRange range("data");
    for (std::size_t k = 0; k < group.size(); ++k) {
      s.input_parts[k].copy_(group[k].inputs, /*non_blocking=*/true);
      s.target_parts[k].copy_(group[k].targets, /*non_blocking=*/true);
    }
  }
  if (s.eager_steps < kWarmupSteps || s.eager_only) {
    if (s.eager_steps == 0) s.warmup_start = std::chrono::steady_clock::now();
    ++s.eager_steps;
    return on_current_stream(s.eager_step(s.input_parts, s.target_parts, samples));
  }
  if (!s.graph) {
    const std::vector<std::string> missing = parameters_without_gradient(*s.model);
    if (!missing.empty()) {
      s.fall_back(fmt::format("{} got no gradient in the {} warm-up steps (a layer the loss does not reach): {}",
                              count_of(static_cast<int64_t>(missing.size()), "parameter"), kWarmupSteps,
                              fmt::join(missing, ", ")));
      return on_current_stream(s.eager_step(s.input_parts, s.target_parts, samples));
    }
  }
  // Host half of this step: learning rate and step counts into the tensors the graph reads.
  const bool replayable = s.split.prepare_step();
  if (!replayable && !s.graph) {
    s.fall_back("the optimizer's update reads a per-step value from the host (parameters with different step counts)");
    return on_current_stream(s.eager_step(s.input_parts, s.target_parts, samples, /*prepared=*/true));
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

GraphedStep::GraphedStep(torch::nn::Sequential, torch::optim::Optimizer&, const optim::LossSpec&, bool, torch::Device,
                         const GraphPlan&, NonFiniteSteps*, GradScaler*, parallel::Strategy*) {
  GPUTRAIN_CHECK(false, "GraphedStep needs a build of LibTorch with CUDA");
}

GraphedStep::~GraphedStep() = default;

std::vector<StepSums> GraphedStep::step(const std::vector<data::Batch>&) { return {}; }

#endif

std::vector<std::string> parameters_without_gradient(const torch::nn::Module& model) {
  std::vector<std::string> names;
  for (const auto& p : model.named_parameters()) {
    if (p.value().requires_grad() && !p.value().grad().defined()) names.push_back(p.key());
  }
  return names;
}

}  // namespace gputrain::step
