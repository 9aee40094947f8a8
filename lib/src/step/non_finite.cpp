#include "gputrain/step/non_finite.h"

#include <fmt/format.h>

namespace gputrain::step {

namespace {
// Steps between two reads of the history: log_every is usually far smaller;
// a longer interval drains it once per this many steps (one sync).
constexpr int64_t kCapacity = 1024;
}  // namespace

NonFiniteSteps::NonFiniteSteps(const torch::Device& device, bool mask_sums)
    : mask_sums_(mask_sums),
      found_(torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device))),
      history_(torch::zeros({kCapacity}, torch::TensorOptions().dtype(torch::kFloat32).device(device))),
      next_(torch::zeros({1}, torch::TensorOptions().dtype(torch::kInt64).device(device))) {}

// A few tiny kernels, no host read: scatter_, not indexing with a tensor,
// which LibTorch's C++ indexing turns into an item() call.
void NonFiniteSteps::check(const torch::Tensor& step_loss, const std::function<void(torch::Tensor&)>& across_ranks) {
  torch::NoGradGuard no_grad;
  at::ne_out(found_, step_loss.detach().mul(0), 0);  // 0 * x is NaN, so not 0, exactly when x is inf or NaN
  if (across_ranks) across_ranks(found_);
  history_.scatter_(0, next_, found_.view({1}));
  next_.add_(1);
  if (mask_sums_) bad_ = found_.ne(0);
}

torch::Tensor NonFiniteSteps::kept(const torch::Tensor& sum) const {
  if (!mask_sums_ || !sum.defined()) return sum;
  return sum.masked_fill(bad_, 0);
}

void NonFiniteSteps::stepped(int64_t step, int64_t samples) {
  pending_.emplace_back(step, samples);
  if (static_cast<int64_t>(pending_.size()) == kCapacity) drain();
}

void NonFiniteSteps::drain() {
  if (pending_.empty()) return;
  const torch::Tensor flags = history_.narrow(0, 0, static_cast<int64_t>(pending_.size())).cpu();
  const float* flag = flags.const_data_ptr<float>();
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    if (flag[i] == 0) continue;
    const auto [step, samples] = pending_[i];
    if (seen_.steps == 0) seen_.first = step;
    seen_.last = step;
    ++seen_.steps;
    seen_.samples += samples;
  }
  pending_.clear();
  next_.zero_();
}

NonFiniteSeen NonFiniteSteps::read() {
  drain();
  const NonFiniteSeen seen = seen_;
  seen_ = NonFiniteSeen{};
  return seen;
}

std::string step_range(const NonFiniteSeen& seen) {
  return seen.steps > 1 ? fmt::format("steps {} to {}", seen.first, seen.last) : fmt::format("step {}", seen.first);
}

}  // namespace gputrain::step
