#include "gputrain/plan/model_init.h"

#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/models/freeze.h"

namespace gputrain::plan {

namespace {

// At most this many names in one message or plan line; the rest are counted.
constexpr std::size_t kNamesShown = 12;

std::string some_of(const std::vector<std::string>& names) {
  if (names.size() <= kNamesShown) return fmt::format("{}", fmt::join(names, "; "));
  return fmt::format("{}; and {} more", fmt::join(names.begin(), names.begin() + kNamesShown, "; "),
                     names.size() - kNamesShown);
}

// The model's tensors by name: what the file's are matched against.
std::vector<std::pair<std::string, torch::Tensor>> model_tensors(const torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) {
    if (b.value().defined()) out.emplace_back(b.key(), b.value());
  }
  return out;
}

// PyTorch's DistributedDataParallel and DataParallel save their wrapped
// model's tensors as "module.<name>".
constexpr std::string_view kWrapperPrefix = "module.";

// A state dict saved from a model wrapped for data parallelism: every name
// under "module.", which no model gputrain builds has. Read without the
// prefix, as torch.nn.modules.utils.consume_prefix_in_state_dict_if_present
// would: the weights are the model's own, and refusing them would only send
// the user to Python to strip it.
void strip_wrapper_prefix(checkpoint::NamedWeights& file, const torch::nn::Module& model, const std::string& path) {
  const auto wrapped = [](const auto& named) { return named.first.rfind(kWrapperPrefix, 0) == 0; };
  const auto children = model.named_children();
  if (file.tensors.empty() || !std::all_of(file.tensors.begin(), file.tensors.end(), wrapped) ||
      children.contains(std::string(kWrapperPrefix.substr(0, kWrapperPrefix.size() - 1)))) {
    return;
  }
  for (auto& [name, tensor] : file.tensors) name.erase(0, kWrapperPrefix.size());
  spdlog::info(
      "model.init_from: {}: every tensor's name starts with '{}', as PyTorch's DistributedDataParallel and "
      "DataParallel save a wrapped model; read without that prefix",
      path, kWrapperPrefix);
}

// A tensor that fits, holding NaN or infinity: weights saved after training
// diverged, which would make the first steps' loss non-finite.
void refuse_non_finite(const ModelInitPlan& plan, const SourceMark& at) {
  std::vector<std::string> bad;
  for (const auto& [name, tensor] : plan.loaded) {
    if (!tensor.is_floating_point()) continue;
    const int64_t non_finite = tensor.numel() - torch::isfinite(tensor).sum().item<int64_t>();
    if (non_finite > 0) bad.push_back(fmt::format("{} ({} of its {} values)", name, non_finite, tensor.numel()));
  }
  if (bad.empty()) return;
  throw ConfigError(
      at, "model.init_from",
      fmt::format("{}: {} NaN or infinite values: {}. These weights were saved after training "
                  "diverged; give an earlier checkpoint of that run, or remove model.init_from",
                  plan.file, bad.size() == 1 ? "a tensor holds" : fmt::format("{} tensors hold", bad.size()),
                  some_of(bad)));
}

void match_file(ModelInitPlan& plan, const torch::nn::Module& model, const config::LoadedConfig& loaded) {
  const config::ModelConfig& c = loaded.config.model;
  const SourceMark at = loaded.sources.at("model.init_from");
  checkpoint::NamedWeights file;
  try {
    file = checkpoint::read_weights(c.init_from);
  } catch (const CheckpointError& e) {
    throw ConfigError(at, "model.init_from", e.what());  // the file's problem, at the key that names it
  }
  strip_wrapper_prefix(file, model, c.init_from);
  plan.file = c.init_from;
  plan.weights = file.what;
  std::map<std::string, torch::Tensor> stored(file.tensors.begin(), file.tensors.end());
  for (const auto& [name, target] : model_tensors(model)) {
    const auto found = stored.find(name);
    if (found == stored.end()) {
      plan.skipped.push_back(fmt::format("{} {}: not in the file", name, c10::str(target.sizes())));
      plan.skipped_values += target.numel();
    } else if (found->second.sizes() != target.sizes()) {
      plan.skipped.push_back(fmt::format("{}: {} in the file, {} in the model", name, c10::str(found->second.sizes()),
                                         c10::str(target.sizes())));
      plan.skipped_values += target.numel();
    } else {
      plan.loaded.emplace_back(name, found->second);
      plan.loaded_values += target.numel();
    }
    if (found != stored.end()) stored.erase(found);
  }
  for (const auto& [name, tensor] : stored) {
    plan.skipped.push_back(fmt::format("{} {}: in the file, not in the model", name, c10::str(tensor.sizes())));
  }
  if (plan.loaded.empty()) {
    throw ConfigError(
        at, "model.init_from",
        fmt::format("{}: none of its {} fits this model by name and shape, so it holds another "
                    "model's weights (its tensors: {}); give the weights of a model built as "
                    "model.* says, or remove model.init_from",
                    c.init_from, count_of(static_cast<int64_t>(file.tensors.size()), "tensor"), some_of(plan.skipped)));
  }
  refuse_non_finite(plan, at);
  if (c.init_strict && !plan.skipped.empty()) {
    throw ConfigError(
        loaded.sources.at("model.init_strict"), "model.init_strict",
        fmt::format("{}: {} would be skipped, not fitting the model: {}. Train from weights of this model, or set "
                    "model.init_strict: false to keep those tensors' initialisation",
                    c.init_from, count_of(static_cast<int64_t>(plan.skipped.size()), "tensor"), some_of(plan.skipped)));
  }
}

// Why a model.freeze prefix matches no parameter: it names a buffer (batchnorm's
// running statistics), a layer that has no parameters, or nothing at all.
std::string unmatched_freeze(const torch::nn::Module& model, const std::string& prefix) {
  const auto buffers = model.named_buffers();
  const bool buffer =
      std::any_of(buffers.begin(), buffers.end(), [&](const auto& b) { return models::under_prefix(b.key(), prefix); });
  if (buffer) {
    return fmt::format(
        "'{}' names a buffer (batchnorm's running statistics), not a parameter: buffers do not train, so there is "
        "nothing to freeze; a batchnorm layer whose parameters are frozen (freeze its name) keeps its running "
        "statistics under model.freeze_batchnorm: eval",
        prefix);
  }
  const auto modules = model.named_modules("", /*include_self=*/false);
  for (const auto& module : modules) {
    if (module.key() == prefix) {
      return fmt::format("'{}' is a layer without parameters, so there is nothing to freeze; remove it", prefix);
    }
  }
  std::vector<std::string> top;
  for (const auto& child : model.named_children()) top.push_back(child.key());
  return fmt::format(
      "'{}' matches no parameter of the model; a prefix is a layer's name or a dotted path inside one "
      "(res1.layers), not a pattern, and the model's layers are: {} (`gputrain model` lists them with their "
      "parameters)",
      prefix, fmt::join(top, ", "));
}

void match_freeze(ModelInitPlan& plan, const torch::nn::Module& model, const config::LoadedConfig& loaded) {
  const config::ModelConfig& c = loaded.config.model;
  const auto named = model.named_parameters();
  for (const std::string& prefix : c.freeze) {
    const bool matches =
        std::any_of(named.begin(), named.end(), [&](const auto& p) { return models::under_prefix(p.key(), prefix); });
    if (!matches) {
      throw ConfigError(loaded.sources.at("model.freeze"), "model.freeze", unmatched_freeze(model, prefix));
    }
  }
  plan.freeze = c.freeze;
  plan.frozen_batchnorm = c.freeze_batchnorm;
  for (const auto& p : named) {
    const bool frozen = std::any_of(c.freeze.begin(), c.freeze.end(),
                                    [&](const std::string& prefix) { return models::under_prefix(p.key(), prefix); });
    (frozen ? plan.frozen_values : plan.trainable_values) += p.value().numel();
    plan.frozen_tensors += frozen ? 1 : 0;
  }
  if (!c.freeze.empty() && plan.trainable_values == 0) {
    throw ConfigError(loaded.sources.at("model.freeze"), "model.freeze",
                      "freezes every parameter, so nothing would train; freeze fewer layers (the new head, at "
                      "least, must train)");
  }
}

}  // namespace

ModelInitPlan resolve_model_init(const config::LoadedConfig& loaded, const torch::nn::Module& model) {
  ModelInitPlan plan;
  const config::ModelConfig& c = loaded.config.model;
  if (c.init_from.empty() && c.freeze.empty()) return plan;
  if (!c.init_from.empty()) match_file(plan, model, loaded);
  match_freeze(plan, model, loaded);
  for (const std::string& line : plan.describe()) spdlog::info("{}", line);
  return plan;
}

std::vector<std::string> ModelInitPlan::describe() const {
  std::vector<std::string> lines;
  if (!file.empty()) {
    lines.push_back(fmt::format("model.init_from: {} ({}): {} loaded ({} values)", file, weights,
                                count_of(static_cast<int64_t>(loaded.size()), "tensor"), loaded_values));
    if (!skipped.empty()) {
      lines.push_back(fmt::format("model.init_from: {} skipped, {} values keep their initialisation: {}",
                                  count_of(static_cast<int64_t>(skipped.size()), "tensor"), skipped_values,
                                  some_of(skipped)));
    }
  }
  if (!freeze.empty()) {
    lines.push_back(fmt::format("model.freeze: {} frozen under {} ({} values); {} values train",
                                count_of(frozen_tensors, "parameter tensor"), fmt::join(freeze, ", "), frozen_values,
                                trainable_values));
    lines.push_back(frozen_batchnorm == config::FrozenBatchnorm::kEval
                        ? "model.freeze_batchnorm: eval (frozen batchnorm layers keep their running statistics)"
                        : "model.freeze_batchnorm: train (frozen batchnorm layers normalise with each batch and "
                          "update their running statistics)");
  }
  return lines;
}

}  // namespace gputrain::plan
