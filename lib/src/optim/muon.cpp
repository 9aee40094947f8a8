#include "gputrain/optim/muon.h"

#include <ATen/ops/_fused_sgd.h>
#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "gputrain/common/error.h"
#include "split_step_parts.h"

namespace gputrain::optim {

torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps) {
  GPUTRAIN_CHECK(g.dim() == 2, "newton_schulz takes a matrix (got {} dimensions)", g.dim());
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  // Scaled so that every singular value is at most 1, where the iteration converges.
  torch::Tensor x = g / (g.norm() + 1e-7);
  // X Xᵀ is the smaller Gram matrix when X is wide.
  const bool tall = g.size(0) > g.size(1);
  if (tall) x = x.t();
  for (int64_t i = 0; i < steps; ++i) {
    const torch::Tensor gram = x.mm(x.t());
    const torch::Tensor poly = torch::addmm(gram, gram, gram, /*beta=*/b, /*alpha=*/c);  // b A + c A²
    x = torch::addmm(x, poly, x, /*beta=*/a);                                            // a X + (b A + c A²) X
  }
  return tall ? x.t() : x;
}

namespace detail {

void muon_update(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                 const std::vector<torch::Tensor>& buffers, double momentum, bool nesterov, int64_t steps,
                 const torch::Tensor& lr_value, const torch::Tensor& keep) {
  const torch::Tensor lr = keep.defined() ? lr_value * keep : lr_value;
  for (std::size_t i = 0; i < params.size(); ++i) {
    torch::Tensor p = params[i];
    const torch::Tensor& grad = grads[i];
    torch::Tensor update = grad;
    if (momentum != 0) {
      torch::Tensor buffer = buffers[i];
      if (keep.defined()) {
        buffer.mul_(keep * (momentum - 1) + 1);
      } else {
        buffer.mul_(momentum);
      }
      buffer.add_(grad);
      update = nesterov ? grad.add(buffer, momentum) : buffer;
    }
    const int64_t rows = p.size(0);
    torch::Tensor rescale = std::sqrt(static_cast<double>(rows)) / p.norm();
    if (keep.defined()) rescale = keep * (rescale - 1) + 1;
    p.mul_(rescale);
    p.sub_(newton_schulz(update.reshape({rows, -1}), steps).view(p.sizes()) * lr);
  }
}

namespace {

// Every per-step value launch_step() reads is a device tensor (the lr) or a
// shape, and the momentum buffers exist before the first launch (started at
// zeros in prepare_step, which gives SGD's first step: 0 × momentum + g = g),
// so a CUDA graph can capture launch_step() once and replay it: no .item(),
// no host branch on tensor values, no allocation that outlives a step.
class Muon final : public torch::optim::SGD, public SplitStep {
 public:
  Muon(std::vector<torch::optim::OptimizerParamGroup> groups, const torch::optim::SGDOptions& defaults,
       std::vector<bool> orthogonal, int64_t steps)
      : SGD(std::move(groups), defaults), orthogonal_(std::move(orthogonal)), steps_(steps) {
    GPUTRAIN_CHECK(orthogonal_.size() == param_groups_.size(), "Muon has {} group kinds for {} groups",
                   orthogonal_.size(), param_groups_.size());
  }

  torch::Tensor step(LossClosure closure = nullptr) override { return step_with(*this, closure); }

  bool prepare_step() override {
    torch::NoGradGuard no_grad;
    work_.assign(param_groups_.size(), Work{});
    lr_.resize(param_groups_.size());
    bool replayable = true;
    for (std::size_t g = 0; g < param_groups_.size(); ++g) {
      const auto& options = static_cast<const torch::optim::SGDOptions&>(param_groups_[g].options());
      Work& w = work_[g];
      for (const torch::Tensor& p : param_groups_[g].params()) {
        if (!p.grad().defined()) {
          replayable = false;  // the set of updated tensors is baked into a capture
          continue;
        }
        w.params.push_back(p);
        w.grads.push_back(p.grad());
        if (options.momentum() != 0) w.buffers.push_back(buffer(p));
      }
      if (!w.params.empty()) lr_[g].set(w.params.front(), options.lr());
    }
    return replayable;
  }

  void launch_step() override {
    torch::NoGradGuard no_grad;
    for (std::size_t g = 0; g < work_.size(); ++g) {
      const auto& options = static_cast<const torch::optim::SGDOptions&>(param_groups_[g].options());
      Work& w = work_[g];
      if (w.params.empty()) continue;
      if (orthogonal_[g]) {
        orthogonal_step(w, options, lr_[g].tensor());
        continue;
      }
      at::_fused_sgd_(w.params, w.grads, options.momentum() != 0 ? at::TensorList(w.buffers) : at::TensorList(),
                      options.weight_decay(), options.momentum(), lr_[g].tensor(), options.dampening(),
                      options.nesterov(), /*maximize=*/false, /*is_first_step=*/false, /*grad_scale=*/std::nullopt,
                      found_inf());
    }
  }

 private:
  struct Work {
    std::vector<torch::Tensor> params, grads, buffers;
  };

  // Muon's step (muon.h) on each weight of a group; a step train.on_nan skips changes nothing.
  void orthogonal_step(Work& w, const torch::optim::SGDOptions& options, const torch::Tensor& lr) {
    const torch::Tensor keep = keep_unless_found(w.grads);  // zeroes the gradients of a skipped step
    muon_update(w.params, w.grads, w.buffers, options.momentum(), options.nesterov(), steps_, lr, keep);
  }

  // The parameter's momentum buffer, started at zeros.
  torch::Tensor buffer(const torch::Tensor& p) {
    auto& slot = state_[p.unsafeGetTensorImpl()];
    if (slot) {
      auto& state = static_cast<torch::optim::SGDParamState&>(*slot);
      if (state.momentum_buffer().defined()) return state.momentum_buffer();
    }
    auto fresh = std::make_unique<torch::optim::SGDParamState>();
    fresh->momentum_buffer(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    torch::Tensor made = fresh->momentum_buffer();
    slot = std::move(fresh);
    return made;
  }

  std::vector<bool> orthogonal_;
  int64_t steps_;
  std::vector<Work> work_;
  std::vector<DeviceValue> lr_;  // per group
};

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_muon(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                   const torch::optim::SGDOptions& defaults,
                                                   std::vector<bool> orthogonal, int64_t steps) {
  return std::make_unique<Muon>(std::move(groups), defaults, std::move(orthogonal), steps);
}

}  // namespace detail
}  // namespace gputrain::optim
