#pragma once
// The training loop on one device: data, model, optimizer, schedule and loss
// built from the config, then epochs of train + test.
#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/device/resolve.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/train/observer.h"

namespace gputrain::train {

struct TrainSummary {
  int64_t epochs = 0;
  int64_t steps = 0;
  EvalResult last_train;
  EvalResult last_test;
  bool has_test = false;
  double elapsed_s = 0;
};

// How the run shares its data, known once the Trainer is built: what the run
// report records about batches and replicas.
struct TrainLayout {
  parallel::StrategyPlan strategy;
  int64_t world_size = 1;
  int64_t train_samples = 0;
  int64_t micro_batch = 0;       // rows per forward pass, before replicas or ranks share them
  int64_t last_micro_batch = 0;  // the epoch's last one: micro_batch when it divides evenly or with drop_last
  int64_t steps_per_epoch = 0;
  bool labeled = true;
  bool classification = true;
};

class Trainer {
 public:
  // Builds everything (loading the data sets, choosing the strategy) and logs
  // the model summary. Throws DataError / ConfigError for input the run cannot use.
  Trainer(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
          const parallel::LaunchInfo& launch = {});
  ~Trainer();

  TrainSummary fit(TrainObserver& observer);
  // One pass over the test split in eval mode under no-grad.
  EvalResult evaluate();

  torch::nn::Sequential model() const;
  TrainLayout layout() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// `gputrain test`: builds the test split and the model, loads `weights_path`
// into it and evaluates. Throws CheckpointError for weights that do not fit.
EvalResult test_weights(const config::LoadedConfig& loaded, const device::DevicePlan& devices,
                        const std::string& weights_path);

// Writes the model's weights atomically (temporary file, then rename), in
// LibTorch's archive format.
void save_weights(const torch::nn::Sequential& model, const std::string& path);
// Loads weights into `model`; throws CheckpointError naming the file when it
// is missing, corrupt or for another model.
void load_weights(torch::nn::Sequential& model, const std::string& path);

}  // namespace gputrain::train
