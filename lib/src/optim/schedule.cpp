#include "gputrain/optim/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gputrain/common/error.h"

namespace gputrain::optim {

namespace {

constexpr double kPi = 3.14159265358979323846;

// From `from` at t = 0 to `to` at t = 1 along half a cosine (OneCycleLR's _annealing_cos).
double anneal(double from, double to, double t) { return to + (from - to) * (1 + std::cos(kPi * t)) / 2; }

}  // namespace

LrSchedule::LrSchedule(const config::OptimConfig& config, int64_t steps_per_epoch, int64_t total_steps,
                       std::vector<double> lr_multipliers, std::vector<int64_t> trained_epochs,
                       std::vector<int64_t> starting_epochs)
    : config_(config),
      steps_per_epoch_(steps_per_epoch),
      total_steps_(total_steps),
      lr_multipliers_(std::move(lr_multipliers)),
      trained_epochs_(std::move(trained_epochs)),
      starting_epochs_(std::move(starting_epochs)) {
  GPUTRAIN_CHECK(steps_per_epoch >= 1 && total_steps >= 1, "LrSchedule needs steps (got {} per epoch, {} in all)",
                 steps_per_epoch, total_steps);
  if (config.scheduler == config::SchedulerName::kStep && config.step_size < 1) {
    throw ConfigError(SourceMark{}, "optim.step_size", fmt::format("must be >= 1 (got {})", config.step_size));
  }
}

double LrSchedule::scheduled(int64_t step) const {
  const double lr = config_.lr;
  const auto s = static_cast<double>(step);
  const auto total = static_cast<double>(total_steps_);
  switch (config_.scheduler) {
    case config::SchedulerName::kNone:
      break;
    case config::SchedulerName::kStep:
      return lr * std::pow(config_.gamma, static_cast<double>(step / (config_.step_size * steps_per_epoch_)));
    case config::SchedulerName::kCosine:
      return lr * (1 + std::cos(kPi * std::min(s, total) / total)) / 2;
    case config::SchedulerName::kOneCycle: {
      const double initial = lr / 25;
      const double final_lr = initial / 1e4;
      const double peak = 0.3 * total - 1;  // PyTorch's end of phase one, a float step
      // s <= peak implies peak >= 0, and 0.3 * T - 1 is never exactly 0 for a whole T.
      if (s <= peak) return anneal(initial, lr, s / peak);
      return anneal(lr, final_lr, std::min(1.0, (s - peak) / (total - 1 - peak)));
    }
    case config::SchedulerName::kLinearWarmupDecay: {
      const double rise = config_.warmup_fraction * total;
      const double fall = config_.cooldown_fraction * total;
      double factor = 1;
      if (rise > 0) factor = std::min(factor, (s + 1) / rise);
      if (fall > 0) factor = std::min(factor, (total - s) / fall);
      return lr * std::max(0.0, factor);
    }
  }
  return lr;
}

double LrSchedule::lr_at(int64_t step) const {
  const double warm =
      step < config_.warmup_steps ? static_cast<double>(step + 1) / static_cast<double>(config_.warmup_steps) : 1.0;
  return warm * scheduled(step);
}

void LrSchedule::apply(torch::optim::Optimizer& optimizer, int64_t step) const {
  auto& groups = optimizer.param_groups();
  GPUTRAIN_CHECK(lr_multipliers_.empty() || lr_multipliers_.size() == groups.size(),
                 "LrSchedule has {} lr multipliers for {} parameter groups", lr_multipliers_.size(), groups.size());
  const double lr = lr_at(step);
  GPUTRAIN_CHECK(trained_epochs_.empty() || trained_epochs_.size() == groups.size(),
                 "LrSchedule has {} trained epoch counts for {} parameter groups", trained_epochs_.size(),
                 groups.size());
  GPUTRAIN_CHECK(starting_epochs_.empty() || starting_epochs_.size() == groups.size(),
                 "LrSchedule has {} starting epochs for {} parameter groups", starting_epochs_.size(), groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const bool done =
        !trained_epochs_.empty() && trained_epochs_[g] > 0 && step >= trained_epochs_[g] * steps_per_epoch_;
    const bool waiting =
        !starting_epochs_.empty() && starting_epochs_[g] > 0 && step < starting_epochs_[g] * steps_per_epoch_;
    groups[g].options().set_lr(done || waiting ? 0.0 : lr_multipliers_.empty() ? lr : lr * lr_multipliers_[g]);
  }
}

}  // namespace gputrain::optim
