#include "gputrain/step/optimizer_step.h"

#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>

#include "gputrain/common/error.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/step/channels_last.h"
#include "gputrain/step/cuda_graph.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::step {

namespace {

class EagerStep : public OptimizerStep {
 public:
  explicit EagerStep(const StepParts& parts) : p_(parts), device_(parts.strategy->device()) {}

  StepResult run(const std::vector<data::Batch>& group, const AgreeFn& agree) override {
    int64_t group_samples = 0;
    for (const auto& mb : group) group_samples += mb.global_size();
    zero_grad();
    StepResult result;
    for (const auto& mb : group) {  // this process's rows of each micro-batch (ddp: its rank's)
      const bool last = &mb == &group.back();
      p_.strategy->log_share(mb);
      torch::Tensor outputs;
      torch::Tensor batch_loss;
      const torch::Tensor targets = mb.targets.to(device_, /*non_blocking=*/true);
      {
        device::NvtxRange range("forward");
        AutocastScope autocast(p_.amp, device_.type());  // the forward pass and the loss
        outputs = p_.strategy->forward_to_train(p_.model, model_inputs(mb.inputs, device_, p_.channels_last), last);
        batch_loss = optim::loss_sum(p_.loss, outputs, targets);
      }
      ended(StepPhase::kForward);
      // Averaging over the whole (global) group's size makes K micro-batches, or N
      // ranks, one step of their combined batch, and weights a short last group
      // by its real size.
      {
        device::NvtxRange range("backward");
        p_.strategy->run_backward([&] { backward_mean_(p_.scaler->scale(batch_loss), group_samples); });
      }
      ended(StepPhase::kBackward);
      // argmax records no autograd node, so the outputs need no detach() (one op fewer per step)
      result.sums.push_back(
          {batch_loss.detach(), optim::correct_count(outputs, targets, p_.loss.classes > 0), mb.size()});
    }
    device::NvtxRange range("optimizer");
    p_.strategy->after_backward(p_.model);
    // fp16's scaler skips non-finite steps itself. Otherwise the step's loss
    // total is checked: finite exactly when every micro-batch's is (a float32
    // sum overflowing to inf is a diverging run too). On the device where the
    // optimizer can skip on its flag (under ddp the ranks take the maximum of
    // it on the stream); else read by agree(), the one device sync a step
    // train.on_nan then costs, whose collective under ddp also carries the
    // ranks' stop and checkpoint requests.
    torch::Tensor step_loss;
    if (!p_.scaler->enabled()) {
      step_loss = result.sums.front().loss_sum;
      for (std::size_t i = 1; i < result.sums.size(); ++i) step_loss = step_loss + result.sums[i].loss_sum;
    }
    if (p_.non_finite != nullptr) {  // checked on the device; the optimizer skips the step itself
      p_.non_finite->check(step_loss, [&](torch::Tensor& found) { p_.strategy->max_across_processes(found); });
      for (MicroBatchSums& sums : result.sums) {
        sums.loss_sum = p_.non_finite->kept(sums.loss_sum);
        sums.correct = p_.non_finite->kept(sums.correct);
      }
      step_loss = torch::Tensor();
    }
    result.agreed = agree(step_loss);
    if (!result.agreed.non_finite) update(result);
    ended(StepPhase::kOptimizer);
    return result;
  }

 private:
  void update(StepResult& result) {
    if (p_.grad_clip > 0) {
      p_.scaler->unscale_(*p_.optimizer);  // clip the true gradients, not the scaled ones
      clip_grad_norm(p_.model->parameters(), p_.grad_clip);
    }
    if (!p_.scaler->step(*p_.optimizer)) result.scaler_skipped_at = p_.scaler->scale();
    p_.scaler->update();
  }

  void ended(StepPhase phase) const {
    if (p_.phase_done) p_.phase_done(phase);
  }

  void zero_grad() {
    if (!p_.zero_grad_in_place) return p_.optimizer->zero_grad();
    // Optimizer::zero_grad(false) detaches each gradient in place, which a
    // view into a bucket refuses; zeroing keeps the view (as Python's zero_grad does).
    torch::NoGradGuard no_grad;
    for (auto& p : p_.model->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

  StepParts p_;
  torch::Device device_;
  optim::MeanBackward backward_mean_;
};

class GraphStep : public OptimizerStep {
 public:
  GraphStep(const StepParts& p, int64_t rows, int64_t micro_batches)
      : graphed_(p.model, *p.optimizer, p.loss, p.channels_last, p.strategy->device(),
                 GraphPlan{rows, p.grad_clip, micro_batches, p.amp}, p.non_finite, p.scaler, p.strategy) {}

  // fp16's skipped steps are counted on the device and show at the next log
  // interval (GradScaler::skipped_steps), not in a warning per step.
  StepResult run(const std::vector<data::Batch>& group, const AgreeFn& agree) override {
    const std::vector<StepSums> sums = graphed_.step(group);
    StepResult result;
    for (std::size_t k = 0; k < group.size(); ++k) {
      result.sums.push_back({sums[k].loss_sum, sums[k].correct, group[k].size()});
    }
    result.agreed = agree({});  // nothing may sync inside the captured step: it checks its loss on the device
    return result;
  }

 private:
  GraphedStep graphed_;
};

}  // namespace

torch::Tensor clip_grad_norm(const std::vector<at::Tensor>& parameters, double max_norm) {
  GPUTRAIN_CHECK(max_norm > 0, "clip_grad_norm needs max_norm > 0 (got {})", max_norm);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return torch::zeros({});
  // PyTorch's torch.nn.utils.clip_grad_norm_ (foreach): one norm per
  // gradient, their norm, and a coefficient capped at 1 that multiplies every
  // gradient; multiplying by exactly 1 changes nothing, as not multiplying would.
  const torch::Tensor total = at::linalg_vector_norm(at::stack(at::_foreach_norm(grads)), 2);
  at::_foreach_mul_(grads, at::clamp_max(max_norm / (total + 1e-6), 1.0));
  return total;
}

std::unique_ptr<OptimizerStep> make_eager_step(const StepParts& parts) { return std::make_unique<EagerStep>(parts); }

std::unique_ptr<OptimizerStep> make_graphed_step(const StepParts& parts, int64_t rows, int64_t micro_batches) {
  return std::make_unique<GraphStep>(parts, rows, micro_batches);
}

}  // namespace gputrain::step
