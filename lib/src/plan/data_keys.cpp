#include "gputrain/plan/data_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/cpu_share.h"

namespace gputrain::plan {

torch::Tensor class_weights(const config::LoadedConfig& loaded, const data::DatasetInfo& info,
                            const torch::Device& device) {
  const std::vector<double>& weights = loaded.config.train.class_weights;
  if (weights.empty()) return {};
  if (info.target_kind != data::TargetKind::kClasses || static_cast<int64_t>(weights.size()) != info.classes) {
    throw ConfigError(
        loaded.sources.at("train.class_weights"), "train.class_weights",
        info.target_kind == data::TargetKind::kClasses
            ? fmt::format("{} weights given but the data set has {}", weights.size(), count_of(info.classes, "class"))
            : "weights classes, but this data set has no class labels");
  }
  return torch::tensor(weights, torch::kFloat32).to(device);
}

optim::LossSpec build_loss(const config::LoadedConfig& loaded, const data::DatasetInfo& info,
                           const torch::Device& device) {
  const bool classification = info.target_kind == data::TargetKind::kClasses;
  optim::LossSpec loss;
  try {
    loss.kind = optim::resolve_loss(loaded.config.train.loss, classification);
  } catch (const ConfigError& e) {
    throw ConfigError(loaded.sources.at("train.loss"), e.key(), e.what());
  }
  loss.classes = classification ? info.classes : 0;
  loss.class_weights = class_weights(loaded, info, device);
  loss.label_smoothing = loaded.config.train.label_smoothing;
  if (loss.label_smoothing > 0 && loss.kind != optim::LossKind::kCrossEntropy) {
    throw ConfigError(loaded.sources.at("train.label_smoothing"), "train.label_smoothing",
                      "smooths class labels, but this run's loss is mse on real-valued targets; set it to 0");
  }
  return loss;
}

void check_evaluation_keys(const config::LoadedConfig& loaded, const data::DatasetInfo& info) {
  const config::TrainConfig& t = loaded.config.train;
  const bool classes = info.target_kind == data::TargetKind::kClasses;
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw ConfigError(loaded.sources.at(key), key, why);
  };
  if (t.target_accuracy > 0 && !classes) {
    refuse("train.target_accuracy",
           fmt::format("is an accuracy, but data set '{}' has no classes; set it to 0", info.name));
  }
  if (t.early_stopping.metric == config::StopMetric::kAccuracy && !classes) {
    refuse("train.early_stopping.metric",
           fmt::format("data set '{}' has no classes to be accurate about; use loss (or auto)", info.name));
  }
  if (!t.tta.hflip && t.tta.translate <= 0) return;
  const std::string key = t.tta.translate > 0 ? "train.tta.translate" : "train.tta.hflip";
  if (info.input_shape.size() != 3) {
    refuse(key, fmt::format("augments images, but data set '{}' has samples of shape [{}]; turn it off", info.name,
                            fmt::join(info.input_shape, ", ")));
  }
  if (t.tta.translate >= std::min(info.input_shape[1], info.input_shape[2])) {
    refuse("train.tta.translate", fmt::format("{} pixels shift the {}x{} images past their edge; use fewer",
                                              t.tta.translate, info.input_shape[1], info.input_shape[2]));
  }
}

int64_t decode_threads(const config::DataConfig& data) {
  if (data.decode_threads > 0) return data.decode_threads;
  // Only the affinity mask and quota count, not the CPUs' load: no window to wait out.
  return device::usable_cpus(device::read_cpu_share(std::chrono::milliseconds(0)));
}

}  // namespace gputrain::plan
