#include "gputrain/optim/multi_tensor.h"

#include "gputrain/optim/muon.h"
#include "split_step_parts.h"

#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_addcdiv.h>
#include <ATen/ops/_foreach_addcmul.h>
#include <ATen/ops/_foreach_div.h>
#include <ATen/ops/_foreach_maximum.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_sqrt.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <ATen/ops/pow.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace gputrain::optim::detail {

namespace {

// How launch_step() updates a group: the fused kernel; the foreach kernels
// with the learning rate, step count and train.on_nan's skip read on the
// device; or the foreach kernels with host scalars (SGD's first step, which
// starts the buffers; Adam's parameters with different step counts).
// kMuon: Muon's step (MultiTensorAdam's Muon groups).
enum class Path { kFused, kForeach, kHost, kMuon };

// `tensors` *= factor, or stay as they are on a step that `keep` (1 - found, see
// SplitStep::keep_unless_found; undefined: nothing to skip on) skips.
void scale_unless_skipped(const std::vector<torch::Tensor>& tensors, double factor, const torch::Tensor& keep) {
  if (keep.defined()) {
    at::_foreach_mul_(tensors, keep * (factor - 1) + 1);
  } else {
    at::_foreach_mul_(tensors, factor);
  }
}

// SGD's step: the same arithmetic as torch::optim::SGD::step, over all
// parameters of a group at once.
class MultiTensorSGD final : public torch::optim::SGD, public SplitStep {
 public:
  MultiTensorSGD(std::vector<torch::optim::OptimizerParamGroup> groups, const torch::optim::SGDOptions& options,
                 StepKernel kernel)
      : SGD(std::move(groups), options), kernel_(kernel) {}

  torch::Tensor step(LossClosure closure = nullptr) override { return step_with(*this, closure); }

  bool prepare_step() override {
    torch::NoGradGuard no_grad;
    groups_.resize(param_groups_.size());
    lr_.resize(param_groups_.size());
    bool replayable = true;
    for (std::size_t g = 0; g < param_groups_.size(); ++g) {
      const auto& options = static_cast<const torch::optim::SGDOptions&>(param_groups_[g].options());
      Work& w = groups_[g];
      w = Work{};
      for (const torch::Tensor& p : param_groups_[g].params()) {
        if (!p.grad().defined()) {
          replayable = false;
          continue;
        }
        w.params.push_back(p);
        w.grads.push_back(p.grad());
        if (options.momentum() != 0) w.buffers.push_back(buffer(p));
      }
      if (w.params.empty()) continue;
      const auto missing = std::count_if(w.buffers.begin(), w.buffers.end(), [](auto& b) { return !b.defined(); });
      // The fused kernel starts every buffer or none on one call; the foreach
      // step with device scalars runs on started buffers.
      w.path = kernel_ == StepKernel::kFused
                   ? (missing == 0 || missing == static_cast<int64_t>(w.buffers.size()) ? Path::kFused : Path::kHost)
                   : (missing == 0 ? Path::kForeach : Path::kHost);
      if (w.path == Path::kHost) {
        replayable = false;
        continue;
      }
      w.first_step = options.momentum() != 0 && missing > 0;
      if (w.first_step) {
        replayable = false;  // is_first_step is baked into the launch
        for (std::size_t i = 0; i < w.params.size(); ++i) {
          // Zeros, not left to the kernel: a first step skipped by found_inf
          // leaves them so, and the next step's momentum * 0 + gradient is
          // then the first step's buffer (optim has no dampening).
          w.buffers[i] = torch::zeros_like(w.grads[i]);
          remember(w.params[i], w.buffers[i]);
        }
      }
      lr_[g].set(w.params.front(), options.lr());
    }
    return replayable;
  }

  void launch_step() override {
    torch::NoGradGuard no_grad;
    std::optional<bool> skip;  // read from the device once, for the first foreach group
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const auto& options = static_cast<const torch::optim::SGDOptions&>(param_groups_[g].options());
      Work& w = groups_[g];
      if (w.params.empty()) continue;
      if (w.path == Path::kFused) {
        at::_fused_sgd_(w.params, w.grads, options.momentum() != 0 ? at::TensorList(w.buffers) : at::TensorList(),
                        options.weight_decay(), options.momentum(), lr_[g].tensor(), options.dampening(),
                        options.nesterov(), /*maximize=*/false, w.first_step, /*grad_scale=*/std::nullopt, found_inf());
        continue;
      }
      if (w.path == Path::kForeach) {
        foreach_on_device(w, options, lr_[g].tensor());
        continue;
      }
      if (!skip) skip = found_on_host();
      if (*skip) continue;
      std::vector<torch::Tensor> d_p =
          options.weight_decay() != 0 ? at::_foreach_add(w.grads, w.params, options.weight_decay()) : w.grads;
      if (options.momentum() != 0) {
        std::vector<torch::Tensor> running, running_d_p;
        for (std::size_t i = 0; i < w.params.size(); ++i) {
          if (w.buffers[i].defined()) {
            running.push_back(w.buffers[i]);
            running_d_p.push_back(d_p[i]);
          } else {  // the first step of this parameter: the buffer starts as its gradient
            w.buffers[i] = d_p[i].clone().detach();
            remember(w.params[i], w.buffers[i]);
          }
        }
        if (!running.empty()) {
          at::_foreach_mul_(running, options.momentum());
          at::_foreach_add_(running, running_d_p, 1 - options.dampening());
        }
        d_p = options.nesterov() ? at::_foreach_add(d_p, w.buffers, options.momentum()) : w.buffers;
      }
      at::_foreach_add_(w.params, d_p, -options.lr());
    }
  }

 private:
  // One group's tensors for launch_step(), gathered by prepare_step().
  struct Work {
    std::vector<torch::Tensor> params, grads, buffers;
    Path path = Path::kHost;
    bool first_step = false;
  };

  // The host path's arithmetic, every momentum buffer started, with the
  // learning rate and the skip as device tensors.
  void foreach_on_device(Work& w, const torch::optim::SGDOptions& options, const torch::Tensor& lr) {
    const torch::Tensor keep = keep_unless_found(w.grads);
    std::vector<torch::Tensor> d_p =
        options.weight_decay() != 0 ? at::_foreach_add(w.grads, w.params, options.weight_decay()) : w.grads;
    if (options.momentum() != 0) {
      if (keep.defined() && options.weight_decay() != 0) at::_foreach_mul_(d_p, keep);  // 0 on a skipped step
      scale_unless_skipped(w.buffers, options.momentum(), keep);
      at::_foreach_add_(w.buffers, d_p, 1 - options.dampening());
      d_p = options.nesterov() ? at::_foreach_add(d_p, w.buffers, options.momentum()) : w.buffers;
    }
    at::_foreach_sub_(w.params, at::_foreach_mul(d_p, keep.defined() ? lr * keep : lr));
  }

  torch::Tensor buffer(const torch::Tensor& p) const {
    const auto it = state_.find(p.unsafeGetTensorImpl());
    if (it == state_.end()) return {};
    return static_cast<const torch::optim::SGDParamState&>(*it->second).momentum_buffer();
  }

  void remember(const torch::Tensor& p, const torch::Tensor& buffer) {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(buffer);
    state_[p.unsafeGetTensorImpl()] = std::move(state);
  }

  StepKernel kernel_;
  std::vector<Work> groups_;
  std::vector<DeviceValue> lr_;  // per group, for the fused and the device foreach step
};

// Adam's and AdamW's step: the same arithmetic as torch::optim::Adam::step
// (L2 penalty added to the gradient) or AdamW::step (decoupled decay), over
// all parameters of a group at once; Muon's step (optim/muon.h) for the
// groups `muon` names, exp_avg its momentum buffer.
template <typename Base, typename Options, typename State, bool kDecoupled>
class MultiTensorAdam final : public Base, public SplitStep {
 public:
  MultiTensorAdam(std::vector<torch::optim::OptimizerParamGroup> groups, const Options& options, StepKernel kernel,
                  MuonGroups muon)
      : Base(std::move(groups), options), kernel_(kernel), muon_(std::move(muon)) {}

  torch::Tensor step(LossClosure closure = nullptr) override { return step_with(*this, closure); }

  bool prepare_step() override {
    torch::NoGradGuard no_grad;
    auto& groups = this->param_groups_;
    work_.resize(groups.size());
    kept_.resize(groups.size());
    bool replayable = true;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& options = static_cast<const Options&>(groups[g].options());
      const auto [beta1, beta2] = options.betas();
      Work& w = work_[g];
      w = Work{};
      std::vector<int64_t> steps;
      for (const torch::Tensor& p : groups[g].params()) {
        if (!p.grad().defined()) {
          replayable = false;
          continue;
        }
        State& s = state(p, options.amsgrad());
        s.step(s.step() + 1);
        steps.push_back(s.step());
        w.params.push_back(p);
        w.grads.push_back(p.grad());
        w.exp_avgs.push_back(s.exp_avg());
        w.exp_avg_sqs.push_back(s.exp_avg_sq());
        if (options.amsgrad()) w.max_exp_avg_sqs.push_back(s.max_exp_avg_sq());
      }
      if (w.params.empty()) continue;
      if (muon_.has(g)) {  // Muon reads only the lr, from the device
        w.path = Path::kMuon;
        kept_[g].lr.set(w.params.front(), options.lr());
        continue;
      }
      // The fused kernel takes one step count per parameter from device
      // tensors, the device foreach step one for all; they share one value
      // unless a parameter missed a gradient.
      const bool shared = std::all_of(steps.begin(), steps.end(), [&](int64_t s) { return s == steps.front(); });
      w.path = !shared ? Path::kHost : kernel_ == StepKernel::kFused ? Path::kFused : Path::kForeach;
      if (w.path != Path::kHost) {
        Kept& k = kept_[g];
        k.lr.set(w.params.front(), options.lr());
        const int64_t counts = w.path == Path::kFused ? static_cast<int64_t>(w.params.size()) : 0;
        k.steps.set(w.params.front(), static_cast<double>(steps.front()), counts);
        if (w.path == Path::kFused) w.state_steps = k.steps.elements();
        continue;
      }
      replayable = false;
      for (int64_t step : steps) {
        const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
        const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
        w.step_sizes.emplace_back(-options.lr() / bias_correction1);
        w.bias_correction2_sqrt.emplace_back(std::sqrt(bias_correction2));
      }
    }
    return replayable;
  }

  void launch_step() override {
    torch::NoGradGuard no_grad;
    std::optional<bool> skip;  // read from the device once, for the first foreach group
    for (std::size_t g = 0; g < work_.size(); ++g) {
      const auto& options = static_cast<const Options&>(this->param_groups_[g].options());
      const auto [beta1, beta2] = options.betas();
      Work& w = work_[g];
      if (w.params.empty()) continue;
      if (w.path == Path::kFused) {
        const auto fused = kDecoupled ? &fused_adamw : &fused_adam;
        fused(w, kept_[g].lr.tensor(), beta1, beta2, options.weight_decay(), options.eps(), options.amsgrad(),
              this->found_inf());
        continue;
      }
      if (w.path == Path::kForeach) {
        foreach_on_device(w, options, kept_[g]);
        continue;
      }
      if (w.path == Path::kMuon) {
        muon_update(w.params, w.grads, w.exp_avgs, muon_.momentum, muon_.nesterov, muon_.steps, kept_[g].lr.tensor(),
                    this->keep_unless_found(w.grads));
        continue;
      }
      if (!skip) skip = this->found_on_host();
      if (*skip) continue;
      std::vector<torch::Tensor> grads = w.grads;
      if (options.weight_decay() != 0) {
        if (kDecoupled) {
          at::_foreach_mul_(w.params, 1 - options.lr() * options.weight_decay());
        } else {
          grads = at::_foreach_add(grads, w.params, options.weight_decay());
        }
      }
      at::_foreach_mul_(w.exp_avgs, beta1);
      at::_foreach_add_(w.exp_avgs, grads, 1 - beta1);
      at::_foreach_mul_(w.exp_avg_sqs, beta2);
      at::_foreach_addcmul_(w.exp_avg_sqs, grads, grads, 1 - beta2);
      if (options.amsgrad()) at::_foreach_maximum_(w.max_exp_avg_sqs, w.exp_avg_sqs);
      std::vector<torch::Tensor> denom = at::_foreach_sqrt(options.amsgrad() ? w.max_exp_avg_sqs : w.exp_avg_sqs);
      at::_foreach_div_(denom, w.bias_correction2_sqrt);
      at::_foreach_add_(denom, options.eps());
      at::_foreach_addcdiv_(w.params, w.exp_avgs, denom, w.step_sizes);
    }
  }

 private:
  // One group's tensors and per-parameter scalars for launch_step(), gathered by prepare_step().
  struct Work {
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps;
    std::vector<at::Scalar> step_sizes, bias_correction2_sqrt;  // the host path only
    Path path = Path::kHost;
  };
  // Device tensors the fused and foreach kernels read, kept at fixed addresses across steps.
  struct Kept {
    DeviceValue lr;
    // The step count: fused, [parameters] whose elements are the per-parameter
    // counts; foreach, one 0-dim count for all.
    DeviceValue steps;
  };

  // The host path's arithmetic with the learning rate, the step count (so the
  // bias corrections) and the skip as device tensors.
  void foreach_on_device(Work& w, const Options& options, Kept& k) {
    const auto [beta1, beta2] = options.betas();
    const torch::Tensor keep = this->keep_unless_found(w.grads);
    const torch::Tensor lr = keep.defined() ? k.lr.tensor() * keep : k.lr.tensor();
    std::vector<torch::Tensor> grads = w.grads;
    if (options.weight_decay() != 0) {
      if (kDecoupled) {
        at::_foreach_mul_(w.params, 1 - lr * options.weight_decay());
      } else {
        grads = at::_foreach_add(grads, w.params, options.weight_decay());
        if (keep.defined()) at::_foreach_mul_(grads, keep);  // 0 on a skipped step
      }
    }
    scale_unless_skipped(w.exp_avgs, beta1, keep);
    at::_foreach_add_(w.exp_avgs, grads, 1 - beta1);
    scale_unless_skipped(w.exp_avg_sqs, beta2, keep);
    at::_foreach_addcmul_(w.exp_avg_sqs, grads, grads, 1 - beta2);
    if (options.amsgrad()) at::_foreach_maximum_(w.max_exp_avg_sqs, w.exp_avg_sqs);
    const torch::Tensor& step = k.steps.tensor();
    std::vector<torch::Tensor> denom = at::_foreach_sqrt(options.amsgrad() ? w.max_exp_avg_sqs : w.exp_avg_sqs);
    at::_foreach_div_(denom, at::sqrt(1 - at::pow(beta2, step)));
    at::_foreach_add_(denom, options.eps());
    std::vector<torch::Tensor> ratio = at::_foreach_div(w.exp_avgs, denom);
    at::_foreach_mul_(ratio, lr / (1 - at::pow(beta1, step)));
    at::_foreach_sub_(w.params, ratio);
  }

  // A step skipped by found_inf still counts in the bias correction: the step
  // counts are the host's, which cannot know.
  static void fused_adam(Work& w, const torch::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                         bool amsgrad, const std::optional<torch::Tensor>& found_inf) {
    at::_fused_adam_(w.params, w.grads, w.exp_avgs, w.exp_avg_sqs, w.max_exp_avg_sqs, w.state_steps, lr, beta1, beta2,
                     weight_decay, eps, amsgrad, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
  }
  static void fused_adamw(Work& w, const torch::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                          bool amsgrad, const std::optional<torch::Tensor>& found_inf) {
    at::_fused_adamw_(w.params, w.grads, w.exp_avgs, w.exp_avg_sqs, w.max_exp_avg_sqs, w.state_steps, lr, beta1, beta2,
                      weight_decay, eps, amsgrad, /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
  }

  // The parameter's state, created as LibTorch's optimizer creates it.
  State& state(const torch::Tensor& p, bool amsgrad) {
    auto& slot = this->state_[p.unsafeGetTensorImpl()];
    if (!slot) {
      auto fresh = std::make_unique<State>();
      fresh->step(0);
      fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      if (amsgrad) fresh->max_exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
      slot = std::move(fresh);
    }
    return static_cast<State&>(*slot);
  }

  StepKernel kernel_;
  MuonGroups muon_;
  std::vector<Work> work_;
  std::vector<Kept> kept_;
};

}  // namespace

torch::Tensor SplitStep::keep_unless_found(const std::vector<torch::Tensor>& grads) const {
  if (!found_.defined()) return {};
  const torch::Tensor skip = found_ != 0;
  for (torch::Tensor g : grads) g.masked_fill_(skip, 0);
  return 1 - found_;
}

std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_sgd(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                               const torch::optim::SGDOptions& options,
                                                               StepKernel kernel) {
  return std::make_unique<MultiTensorSGD>(std::move(groups), options, kernel);
}

std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_adam(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                const torch::optim::AdamOptions& options,
                                                                StepKernel kernel, MuonGroups muon) {
  using Adam = MultiTensorAdam<torch::optim::Adam, torch::optim::AdamOptions, torch::optim::AdamParamState, false>;
  return std::make_unique<Adam>(std::move(groups), options, kernel, std::move(muon));
}

std::unique_ptr<torch::optim::Optimizer> make_multi_tensor_adamw(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                                 const torch::optim::AdamWOptions& options,
                                                                 StepKernel kernel, MuonGroups muon) {
  using AdamW = MultiTensorAdam<torch::optim::AdamW, torch::optim::AdamWOptions, torch::optim::AdamWParamState, true>;
  return std::make_unique<AdamW>(std::move(groups), options, kernel, std::move(muon));
}

}  // namespace gputrain::optim::detail
