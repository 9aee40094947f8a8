#include "gputrain/train/evaluate.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/nn/functional/padding.h>

#include <cmath>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/models/factory.h"
#include "gputrain/plan/data_keys.h"
#include "gputrain/step/backends.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::train {

TestTimeAugmentation test_time_augmentation(const config::TtaConfig& config) {
  return {config.hflip, config.translate};
}

std::string describe_views(const TestTimeAugmentation& tta) {
  if (!tta.enabled()) return "none, each image alone";
  std::string views = "the image";
  if (const int64_t t = tta.translate; t > 0) {
    views += fmt::format(", shifted {} pixel{} up, down, left and right", t, t == 1 ? "" : "s");
  }
  if (tta.hflip) views += tta.translate > 0 ? ", and each of those mirrored" : " and its mirror image";
  return fmt::format("{} per image, their outputs averaged (train.tta: {})", tta.views(), views);
}

std::vector<torch::Tensor> tta_views(const torch::Tensor& images, const TestTimeAugmentation& tta) {
  namespace F = torch::nn::functional;
  using torch::indexing::Slice;
  std::vector<torch::Tensor> views{images};
  if (const int64_t t = tta.translate; t > 0) {
    const int64_t h = images.size(2);
    const int64_t w = images.size(3);
    const torch::Tensor padded = F::pad(images, F::PadFuncOptions({t, t, t, t}).mode(torch::kReflect));
    for (const auto& [dy, dx] : {std::pair{-t, 0L}, {t, 0L}, {0L, -t}, {0L, t}}) {
      views.push_back(padded.index({Slice(), Slice(), Slice(t + dy, t + dy + h), Slice(t + dx, t + dx + w)}));
    }
  }
  if (tta.hflip) {
    const std::size_t unflipped = views.size();
    for (std::size_t i = 0; i < unflipped; ++i) views.push_back(views[i].flip({3}));
  }
  return views;
}

torch::Tensor test_time_outputs(torch::nn::Sequential& model, parallel::Strategy& strategy, const torch::Tensor& inputs,
                                const TestTimeAugmentation& tta) {
  if (!tta.enabled()) return strategy.forward(model, inputs);
  const std::vector<torch::Tensor> views = tta_views(inputs.to(strategy.device(), /*non_blocking=*/true), tta);
  torch::Tensor sum = strategy.forward(model, views[0]).to(torch::kFloat32);
  for (std::size_t i = 1; i < views.size(); ++i) sum += strategy.forward(model, views[i]);
  return sum / static_cast<double>(views.size());
}

step::EvalResult evaluate(torch::nn::Sequential& model, data::BatchLoader& batches, parallel::Strategy& strategy,
                          const optim::LossSpec& loss, config::AmpMode amp, const TestTimeAugmentation& tta) {
  torch::NoGradGuard no_grad;
  const step::CudnnSearchOff no_search;
  model->eval();
  step::RunningSums sums;
  batches.start_epoch(0);
  const c10::DeviceType device_type = strategy.device().type();
  const bool classification = loss.classes > 0;
  // The test loss is the plain cross-entropy, comparable between runs with and without train.label_smoothing.
  optim::LossSpec unsmoothed = loss;
  unsmoothed.label_smoothing = 0;
  step::ClassCounts by_class(loss.classes);
  while (auto batch = batches.next()) {
    const data::Batch& local = *batch;  // this process's rows (ddp: its rank's)
    strategy.log_share(local);
    const torch::Tensor targets = local.targets.to(strategy.device(), /*non_blocking=*/true);
    step::AutocastScope autocast(amp, device_type);
    const torch::Tensor outputs = test_time_outputs(model, strategy, local.inputs, tta);
    // The correct count comes from the counts by class: one argmax a batch, not two.
    sums.add(optim::loss_sum(unsmoothed, outputs, targets), torch::Tensor(), local.size());
    if (classification) by_class.add(targets, outputs.argmax(1));
  }
  step::EvalResult result = sums.collect(classification, strategy);
  if (classification) by_class.collect(result, strategy);  // every rank, also one that saw no rows
  return result;
}

namespace {

// The host running out of memory or threads while testing, whose batches data.test_batch_size sizes when set.
[[noreturn]] void rethrow_host_exhaustion_testing(const plan::RunPlan& plan) {
  const char* key = plan.data.test_batch_size > 0 ? "data.test_batch_size" : "data.batch_size";
  device::rethrow_as_resource_error(fmt::format("testing at {} {} with {} loader workers", key,
                                                plan.test_loader.batch_size, plan.test_loader.num_workers),
                                    fmt::format("Lower {}, data.num_workers, or the model's size", key));
}

}  // namespace

SavedModel load_saved_model(const config::ModelConfig& config, const data::DatasetInfo& info,
                            const device::DevicePlan& devices, const std::string& weights_path, const char* purpose) {
  parallel::StrategyPlan single;
  single.replicas = {devices.primary()};
  single.reason = purpose;
  SavedModel saved{parallel::make_strategy(single, {}), models::make_model(config, models::model_shape(info, config))};
  checkpoint::load_weights(saved.model, weights_path);
  saved.model->to(saved.strategy->device());
  return saved;
}

// A function-try-block, as Trainer::fit is: the host running out of memory or
// threads says which keys to lower.
step::EvalResult evaluate_saved_weights(const plan::RunPlan& plan, const std::string& weights_path) try {
  const data::DatasetInfo& trained = plan.trained;
  auto [strategy, model] = load_saved_model(plan.network, trained, plan.devices, weights_path, "testing saved weights");
  const TestTimeAugmentation tta = test_time_augmentation(plan.evaluation.tta);
  if (trained.images) spdlog::info("test-time views: {}", describe_views(tta));
  data::HostLoader batches(plan.test_set, plan.test_loader);
  step::EvalResult result = evaluate(model, batches, *strategy, plan.loss, plan.step.amp, tta);
  result.class_names = trained.class_names;
  return result;
} catch (const std::exception&) {
  rethrow_host_exhaustion_testing(plan);
}

std::string format_test_line(const step::EvalResult& result) {
  if (!result.classification) return fmt::format("Test set: Average loss: {:.4f}", result.mean_loss());
  return fmt::format("Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)", result.mean_loss(), result.correct,
                     result.samples, 100.0 * result.accuracy());
}

std::vector<std::string> format_class_lines(const step::EvalResult& result) {
  std::vector<std::string> lines;
  const auto label = [&](int64_t c) {
    const auto i = static_cast<std::size_t>(c);
    return i < result.class_names.size() ? fmt::format("{} ({})", c, result.class_names[i]) : std::to_string(c);
  };
  for (std::size_t c = 0; c < result.class_samples.size(); ++c) {
    const int64_t total = result.class_samples[c];
    const int64_t correct = result.class_correct[c];
    const std::string name = label(static_cast<int64_t>(c));
    lines.push_back(total == 0 ? fmt::format("Accuracy of class {}: no test samples", name)
                               : fmt::format("Accuracy of class {}: {:.0f}% ({}/{})", name,
                                             100.0 * static_cast<double>(correct) / static_cast<double>(total), correct,
                                             total));
  }
  for (const step::Confusion& c : result.top_confusions) {
    lines.push_back(fmt::format("Confused: class {} predicted as {}: {} of its {} test samples", label(c.truth),
                                label(c.predicted), c.count,
                                result.class_samples.at(static_cast<std::size_t>(c.truth))));
  }
  return lines;
}

}  // namespace gputrain::train
