#include "gputrain/train/optim.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/scalar_tensor.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string_view>

#include "gputrain/common/strings.h"

#include "multi_tensor_optim.h"

namespace gputrain::train {

namespace {
// optim.foreach / optim.fused pick a multi-tensor step; neither keeps LibTorch's own.
std::optional<detail::StepKernel> step_kernel(const config::OptimConfig& c) {
  if (c.fused == config::Switch::kOn) return detail::StepKernel::kFused;
  if (c.foreach) return detail::StepKernel::kForeach;
  return std::nullopt;
}

// LibTorch's groups for `groups`: `defaults` with each group's weight decay and lr × multiplier.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> torch_groups(const std::vector<ParamGroup>& groups,
                                                            const Options& defaults) {
  std::vector<torch::optim::OptimizerParamGroup> out;
  for (const ParamGroup& group : groups) {
    auto options = std::make_unique<Options>(defaults);
    options->lr(defaults.lr() * group.lr_multiplier).weight_decay(group.weight_decay);
    out.emplace_back(group.params, std::move(options));
  }
  return out;
}

std::unique_ptr<torch::optim::Optimizer> make_sgd(const config::OptimConfig& c, const std::vector<ParamGroup>& groups) {
  const auto options =
      torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay).nesterov(c.nesterov);
  auto grouped = torch_groups(groups, options);
  if (const auto kernel = step_kernel(c)) return detail::make_multi_tensor_sgd(std::move(grouped), options, *kernel);
  return std::make_unique<torch::optim::SGD>(std::move(grouped), options);
}

// Adam and AdamW take the same options; they differ in how weight decay applies.
template <typename Optimizer, typename Options, auto make_multi_tensor>
std::unique_ptr<torch::optim::Optimizer> make_adam(const config::OptimConfig& c,
                                                   const std::vector<ParamGroup>& groups) {
  if (c.betas.size() != 2) {
    throw ConfigError(SourceMark{}, "optim.betas",
                      fmt::format("needs two values [beta1, beta2] (got {})", c.betas.size()));
  }
  const auto options = Options(c.lr).betas({c.betas[0], c.betas[1]}).eps(c.eps).weight_decay(c.weight_decay);
  auto grouped = torch_groups(groups, options);
  if (const auto kernel = step_kernel(c)) return make_multi_tensor(std::move(grouped), options, *kernel);
  return std::make_unique<Optimizer>(std::move(grouped), options);
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

constexpr double kPi = 3.14159265358979323846;

// From `from` at t = 0 to `to` at t = 1 along half a cosine (OneCycleLR's _annealing_cos).
double anneal(double from, double to, double t) { return to + (from - to) * (1 + std::cos(kPi * t)) / 2; }

// argmax(1) == targets, counted by one pass over the logits: argmax's rule
// (the first largest; NaN counts as largest, the first NaN wins).
template <typename Scalar>
int64_t count_on_host(const torch::Tensor& outputs, const torch::Tensor& targets) {
  const auto logits = outputs.accessor<Scalar, 2>();
  const auto labels = targets.accessor<int64_t, 1>();
  int64_t correct = 0;
  for (int64_t row = 0; row < logits.size(0); ++row) {
    int64_t best = 0;
    float best_value = static_cast<float>(logits[row][0]);
    for (int64_t column = 1; column < logits.size(1) && !std::isnan(best_value); ++column) {
      const auto value = static_cast<float>(logits[row][column]);
      if (std::isnan(value) || value > best_value) {
        best = column;
        best_value = value;
      }
    }
    correct += best == labels[row] ? 1 : 0;
  }
  return correct;
}

}  // namespace

std::vector<ParamGroup> param_groups(const config::OptimConfig& config,
                                     const torch::OrderedDict<std::string, torch::Tensor>& named_parameters) {
  // Indexed by no_decay + 2 * scaled, in the order the header gives; `what` holds the noun until the count is known.
  std::array<ParamGroup, 4> kinds{ParamGroup{{}, config.weight_decay, 1, "tensor"}, ParamGroup{{}, 0, 1, "tensor"},
                                  ParamGroup{{}, config.weight_decay, config.bias_lr_multiplier, "bias"},
                                  ParamGroup{{}, 0, config.bias_lr_multiplier, "bias"}};
  for (const auto& item : named_parameters) {
    const bool no_decay = config.no_decay_bias_norm && item.value().dim() <= 1;
    const bool scaled = config.bias_lr_multiplier != 1 && ends_with(item.key(), "bias");
    kinds[(no_decay ? 1 : 0) + (scaled ? 2 : 0)].params.push_back(item.value());
  }
  std::vector<ParamGroup> groups;
  for (std::size_t kind = 0; kind < kinds.size(); ++kind) {
    ParamGroup& group = kinds[kind];
    if (group.params.empty()) continue;
    group.what = count_of(static_cast<int64_t>(group.params.size()), group.what) + (kind == 1 ? " of dim <= 1" : "");
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string describe(const std::vector<ParamGroup>& groups) {
  std::vector<std::string> parts;
  for (const ParamGroup& g : groups) {
    parts.push_back(
        fmt::format("{} {}, lr × {}", g.what,
                    g.weight_decay != 0 ? fmt::format("with weight decay {}", g.weight_decay) : "without weight decay",
                    g.lr_multiplier));
  }
  return fmt::format("{}: {}", count_of(static_cast<int64_t>(groups.size()), "parameter group"),
                     fmt::join(parts, "; "));
}

std::vector<double> lr_multipliers(const std::vector<ParamGroup>& groups) {
  std::vector<double> out;
  for (const ParamGroup& group : groups) out.push_back(group.lr_multiplier);
  return out;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimConfig& config,
                                                        const std::vector<ParamGroup>& groups) {
  switch (config.name) {
    case config::OptimizerName::kSgd:
      return make_sgd(config, groups);
    case config::OptimizerName::kAdam:
      return make_adam<torch::optim::Adam, torch::optim::AdamOptions, detail::make_multi_tensor_adam>(config, groups);
    case config::OptimizerName::kAdamW:
      return make_adam<torch::optim::AdamW, torch::optim::AdamWOptions, detail::make_multi_tensor_adamw>(config,
                                                                                                         groups);
  }
  config::unhandled(config.name);
}

bool skip_updates_when(torch::optim::Optimizer& optimizer, const torch::Tensor& found) {
  auto* split = dynamic_cast<detail::SplitStep*>(&optimizer);
  if (split == nullptr) return false;
  split->skip_when(found);
  return true;
}

LrSchedule::LrSchedule(const config::OptimConfig& config, int64_t steps_per_epoch, int64_t total_steps,
                       std::vector<double> lr_multipliers)
    : config_(config),
      steps_per_epoch_(steps_per_epoch),
      total_steps_(total_steps),
      lr_multipliers_(std::move(lr_multipliers)) {
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
  for (std::size_t g = 0; g < groups.size(); ++g) {
    groups[g].options().set_lr(lr_multipliers_.empty() ? lr : lr * lr_multipliers_[g]);
  }
}

LossKind resolve_loss(config::LossName name, bool class_targets) {
  switch (name) {
    case config::LossName::kAuto:
      break;
    case config::LossName::kCrossEntropy:
      if (!class_targets) {
        throw ConfigError(SourceMark{}, "train.loss",
                          "cross_entropy needs class labels, but the data set's targets are real values (use mse or "
                          "auto)");
      }
      break;
    case config::LossName::kMse:
      if (class_targets) {
        throw ConfigError(SourceMark{}, "train.loss",
                          "mse needs real-valued targets, but the data set's targets are class labels (use "
                          "cross_entropy or auto)");
      }
      break;
  }
  return class_targets ? LossKind::kCrossEntropy : LossKind::kMse;
}

torch::Tensor loss_sum(const LossSpec& loss, const torch::Tensor& outputs, const torch::Tensor& targets) {
  namespace F = torch::nn::functional;
  if (loss.kind == LossKind::kCrossEntropy) {
    auto options = F::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(loss.label_smoothing);
    if (!loss.class_weights.defined()) return F::cross_entropy(outputs, targets, options);
    const torch::Tensor weighted = F::cross_entropy(outputs, targets, options.weight(loss.class_weights));
    return weighted * (static_cast<double>(targets.size(0)) / loss.class_weights.index_select(0, targets).sum());
  }
  // Equal shapes, checked: mse_loss would broadcast [N, 1] against [N] into [N, N].
  GPUTRAIN_CHECK(outputs.dim() >= 2 && outputs.sizes() == targets.sizes(),
                 "mse needs outputs and targets shaped alike as [N, values...] (got [{}] and [{}])",
                 fmt::join(outputs.sizes(), ", "), fmt::join(targets.sizes(), ", "));
  return F::mse_loss(outputs, targets, F::MSELossFuncOptions().reduction(torch::kNone)).flatten(1).mean(1).sum();
}

torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification) {
  if (!classification) return {};
  // On the CPU nothing is to be kept from syncing, and argmax, eq and sum of a
  // small batch cost more in dispatch and reduction set-up than the counting
  // itself: 4 us a step, 8% of the seed MLP's (its [32, 2] logits).
  if (outputs.is_cpu() && targets.is_cpu() && outputs.dim() == 2 && targets.dim() == 1 &&
      targets.scalar_type() == torch::kInt64 && outputs.size(0) == targets.size(0) && outputs.size(1) > 0) {
    int64_t correct = 0;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, outputs.scalar_type(), "correct_count",
                                    [&] { correct = count_on_host<scalar_t>(outputs, targets); });
    return at::scalar_tensor(correct, torch::TensorOptions().dtype(torch::kInt64));
  }
  return outputs.argmax(1).eq(targets).sum();
}

void MeanBackward::operator()(const torch::Tensor& loss_sum, int64_t samples) {
  torch::Tensor& weight = weights_[samples];
  if (!weight.defined() || weight.scalar_type() != loss_sum.scalar_type() || weight.device() != loss_sum.device()) {
    weight = torch::full({}, 1.0 / static_cast<double>(samples), loss_sum.options());
  }
  loss_sum.backward(weight);
}

}  // namespace gputrain::train
