#pragma once
// The small classification run the trainer's tests start from: 256 synthetic
// samples of 8 features in 3 classes, batches of 32 (8 steps an epoch), an MLP, 4 epochs.
#include <string>
#include <vector>

#include "gputrain/config/load.h"
#include "gputrain/device/resolve.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::train {

inline config::LoadedConfig synthetic_run(const std::vector<std::string>& overrides = {}) {
  return config::load_config_text(R"(
name: t
seed: 3
device: cpu
data: {dataset: synthetic, samples: 256, test_samples: 128, features: 8, classes: 3, batch_size: 32,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [16]}
optim: {name: sgd, lr: 0.1, momentum: 0.9}
train: {epochs: 4, log_every: 4}
)",
                                  "t.yaml", overrides);
}

inline device::DevicePlan cpu() { return device::DevicePlan{}; }

// What `gputrain <purpose>` resolves for saved weights on this machine's CPU.
inline plan::RunPlan saved_model_plan(const config::LoadedConfig& loaded, plan::Purpose purpose,
                                      const std::string& weights = "", bool run_views = true) {
  plan::RunRequest request;
  request.purpose = purpose;
  request.weights = weights;
  request.run_views = run_views;
  return plan::resolve_run(loaded, request);
}

// `gputrain test` of `weights` on this machine's CPU.
inline step::EvalResult test_saved_weights(const config::LoadedConfig& loaded, const std::string& weights) {
  return evaluate_saved_weights(saved_model_plan(loaded, plan::Purpose::kEvaluate), weights);
}

}  // namespace gputrain::train
