#include "gputrain/optim/optimizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/optim/multi_tensor.h"
#include "gputrain/optim/muon.h"

namespace gputrain::optim {

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

// Which of `groups` are Muon's, with optim.muon's settings.
detail::MuonGroups muon_groups(const config::OptimConfig& c, const std::vector<ParamGroup>& groups) {
  detail::MuonGroups muon{{}, c.muon.momentum, c.muon.nesterov, c.muon.steps};
  for (const ParamGroup& group : groups) muon.orthogonal.push_back(group.muon);
  return muon;
}

bool has_muon(const std::vector<ParamGroup>& groups) {
  return std::any_of(groups.begin(), groups.end(), [](const ParamGroup& g) { return g.muon; });
}

// Adam and AdamW take the same options; they differ in how weight decay applies.
// With a Muon group, the multi-tensor step (fused unless optim.foreach) with Muon's step for it.
template <typename Optimizer, typename Options, auto make_multi_tensor>
std::unique_ptr<torch::optim::Optimizer> make_adam(const config::OptimConfig& c,
                                                   const std::vector<ParamGroup>& groups) {
  if (c.betas.size() != 2) {
    throw ConfigError(SourceMark{}, "optim.betas",
                      fmt::format("needs two values [beta1, beta2] (got {})", c.betas.size()));
  }
  const auto options = Options(c.lr).betas({c.betas[0], c.betas[1]}).eps(c.eps).weight_decay(c.weight_decay);
  auto grouped = torch_groups(groups, options);
  if (has_muon(groups)) {
    return make_multi_tensor(std::move(grouped), options, step_kernel(c).value_or(detail::StepKernel::kFused),
                             muon_groups(c, groups));
  }
  if (const auto kernel = step_kernel(c)) return make_multi_tensor(std::move(grouped), options, *kernel, {});
  return std::make_unique<Optimizer>(std::move(grouped), options);
}

// SGD for the groups that are not Muon's, with optim.muon's momentum for Muon's.
std::unique_ptr<torch::optim::Optimizer> make_muon(const config::OptimConfig& c,
                                                   const std::vector<ParamGroup>& groups) {
  const auto options =
      torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay).nesterov(c.nesterov);
  auto grouped = torch_groups(groups, options);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].muon) continue;
    auto& muon = static_cast<torch::optim::SGDOptions&>(grouped[g].options());
    muon.momentum(c.muon.momentum).nesterov(c.muon.nesterov);
  }
  return detail::make_muon(std::move(grouped), options, muon_groups(c, groups).orthogonal, c.muon.steps);
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::vector<ParamGroup> param_groups(const config::OptimConfig& config,
                                     const torch::OrderedDict<std::string, torch::Tensor>& named_parameters,
                                     const std::map<std::string, int64_t>& first_epochs_only,
                                     const FrozenFirst& frozen_first) {
  // Indexed by no_decay + 2 * scaled, in the order the header gives; `what` holds the noun until the count is known.
  std::array<ParamGroup, 4> kinds{ParamGroup{{}, config.weight_decay, 1, "tensor"}, ParamGroup{{}, 0, 1, "tensor"},
                                  ParamGroup{{}, config.weight_decay, config.bias_lr_multiplier, "bias"},
                                  ParamGroup{{}, 0, config.bias_lr_multiplier, "bias"}};
  ParamGroup muon{{}, 0, config.muon.lr / config.lr, "convolution weight", true};
  std::vector<ParamGroup> early;  // first_epochs_only's
  // frozen_first's, by the same rules: from epoch frozen_first.epochs on, lr × its later multiplier too.
  std::array<ParamGroup, 4> later = kinds;
  for (ParamGroup& group : later) {
    group.lr_multiplier *= frozen_first.later_multiplier;
    group.from_epoch = frozen_first.epochs;
  }
  const auto frozen_at_first = [&](const std::string& name) {
    return frozen_first.epochs > 0 && frozen_first.names.count(name) > 0;
  };
  for (const auto& item : named_parameters) {
    if (!item.value().requires_grad()) continue;  // model.freeze: it does not train
    if (config.muon.lr > 0 && item.value().dim() == 4) {
      muon.params.push_back(item.value());
      continue;
    }
    const bool no_decay = config.no_decay_bias_norm && item.value().dim() <= 1;
    const bool scaled = config.bias_lr_multiplier != 1 && ends_with(item.key(), "bias");
    const ParamGroup& kind = kinds[(no_decay ? 1 : 0) + (scaled ? 2 : 0)];
    if (const auto it = first_epochs_only.find(item.key()); it != first_epochs_only.end()) {
      early.push_back({{item.value()},
                       kind.weight_decay,
                       kind.lr_multiplier,
                       fmt::format("{} for the first {} epochs", item.key(), it->second),
                       false,
                       it->second});
      continue;
    }
    (frozen_at_first(item.key()) ? later : kinds)[(no_decay ? 1 : 0) + (scaled ? 2 : 0)].params.push_back(item.value());
  }
  std::vector<ParamGroup> groups;
  for (auto* set : {&kinds, &later}) {
    for (std::size_t kind = 0; kind < set->size(); ++kind) {
      ParamGroup& group = (*set)[kind];
      if (group.params.empty()) continue;
      group.what = count_of(static_cast<int64_t>(group.params.size()), group.what) + (kind == 1 ? " of dim <= 1" : "") +
                   (set == &later ? fmt::format(" frozen for the first {} epochs", frozen_first.epochs) : "");
      groups.push_back(std::move(group));
    }
  }
  for (ParamGroup& group : early) groups.push_back(std::move(group));
  if (!muon.params.empty()) {
    muon.what = count_of(static_cast<int64_t>(muon.params.size()), muon.what) + " by Muon";
    groups.push_back(std::move(muon));
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

std::vector<int64_t> trained_epochs(const std::vector<ParamGroup>& groups) {
  std::vector<int64_t> out;
  for (const ParamGroup& group : groups) out.push_back(group.epochs);
  return out;
}

std::vector<int64_t> starting_epochs(const std::vector<ParamGroup>& groups) {
  std::vector<int64_t> out;
  for (const ParamGroup& group : groups) out.push_back(group.from_epoch);
  return out;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::OptimConfig& config,
                                                        const std::vector<ParamGroup>& groups) {
  switch (config.name) {
    case config::OptimizerName::kSgd:
      return has_muon(groups) ? make_muon(config, groups) : make_sgd(config, groups);
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

}  // namespace gputrain::optim
