#pragma once
// What a checkpoint holds, and reading one back. The payload (see format.h for
// the envelope) is a LibTorch serialize archive with these entries:
//   model_names, model_tensors  the weights by dotted name, two flat lists (format 1: model/...)
//   optimizer_*         groups' options, per-parameter state as flat lists (format 1: optimizer/...)
//   scaler              GradScaler state: name -> number (empty when the scaler is off)
//   position/*          epochs done, micro-batches of the next epoch done, optimizer steps
//   sums/{epoch,interval}/*  the partial epoch's and log interval's running sums
//   rng/cpu, rng/cuda/N the generators' states
//   best_score, skipped_steps
//   batch_{global,accumulation,test}  the batch the run resolved (absent before 2026-11-28)
//   training_data       what the model knows of its training data (data::model_description; absent in older files)
//   config, torch_version, gputrain_version
// The learning-rate schedule is a function of the step and the config, and the
// data order of the seed and the epoch, so both are restored by those.
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::optim {
class Optimizer;
}  // namespace torch::optim
namespace torch::serialize {
class InputArchive;
}  // namespace torch::serialize

namespace gputrain::checkpoint {

// Where training stands: `epoch` epochs are complete and `batch` micro-batches
// of the next one are consumed (0 at an epoch boundary; every batch when the
// run stopped after an epoch's last step, before its test pass).
struct Position {
  int64_t epoch = 0;
  int64_t batch = 0;
  int64_t step = 0;  // optimizer steps since the run began
};

// Loss and correct-prediction sums of a partial epoch or log interval, as the
// trainer keeps them (tensors, dtype included), so resumed metrics are the
// same to the bit.
struct PartialSums {
  torch::Tensor loss;     // undefined: nothing summed yet
  torch::Tensor correct;  // undefined: nothing summed yet, or regression
  int64_t samples = 0;
};

struct RngState {
  torch::Tensor cpu;                // the default CPU generator
  std::vector<torch::Tensor> cuda;  // the default generator of each CUDA device, by index
};

// The calling process's generators: CPU, and every CUDA device's when CUDA is available.
RngState capture_rng();
// Sets them back; states of CUDA devices this process does not have are ignored.
void restore_rng(const RngState& state);

// The batch a run resolved (plan::BatchPlan): samples per optimizer step, the
// micro-batches in each, and rows per evaluation batch. The stored config is
// the config as written (data.batch_size: auto stays auto), so a resumed run
// takes these instead of measuring again.
struct ResolvedBatch {
  int64_t global = 0;
  int64_t accumulation = 1;
  int64_t test = 0;
  bool operator==(const ResolvedBatch& other) const {
    return global == other.global && accumulation == other.accumulation && test == other.test;
  }
};

// Everything a checkpoint holds besides the model's and optimizer's tensors.
struct TrainingState {
  Position position;
  PartialSums epoch_sums;
  PartialSums interval_sums;
  std::map<std::string, double> scaler;  // GradScaler::state_dict()
  RngState rng;
  std::optional<double> best_score;  // best test score so far: accuracy, or -loss for regression
  int64_t skipped_steps = 0;         // steps skipped for a non-finite loss (train.on_nan: skip)
  // train.ema: the average's tensors (the model's parameters, then its buffers); empty before its first update.
  std::vector<torch::Tensor> ema;
  // optim.lookahead: the slow weights (the trained parameters, in the model's
  // order); empty without it, and in checkpoints written before it existed.
  std::vector<torch::Tensor> lookahead;
  // train.early_stopping: the best score of its metric (higher is better), the
  // evaluations since, and with restore_best the weights that scored it.
  std::optional<double> stop_best;
  int64_t evals_since_best = 0;
  std::vector<torch::Tensor> best_weights;
  int64_t evaluated_step = 0;  // the step of the last evaluation; 0: none
  // Absent in checkpoints written before 2026-11-28, whose config holds the resolved numbers instead.
  std::optional<ResolvedBatch> batch;
  // The training data as the model knows it (data::model_description's JSON),
  // for predict, test and export without that data; empty in older checkpoints.
  std::string data;
  std::string config;         // config::dump_config of the run's config, as written
  std::string torch_version;  // of the writer; encode() fills both
  std::string gputrain_version;
};

// The sealed bytes of a checkpoint of `state`, `model` and `optimizer`.
std::string encode(const TrainingState& state, const torch::nn::Module& model,
                   const torch::optim::Optimizer& optimizer);

// A checkpoint read and checked: its training state, with the model's and
// optimizer's entries kept to be copied into live objects.
class Checkpoint {
 public:
  // Checks and parses a checkpoint's bytes; `name` (the file) begins every
  // error. Throws CheckpointError for anything but an intact checkpoint in a
  // format this build reads, and never crashes: the fuzz target's entry point.
  static Checkpoint parse(std::string_view bytes, std::string name);
  // parse() of a file's bytes; a missing or unreadable file is a CheckpointError too.
  static Checkpoint read(const std::filesystem::path& path);

  const std::string& name() const { return name_; }
  const TrainingState& state() const { return state_; }

  // Copies the stored weights into `model`, on whatever device it is, after
  // checking every parameter and buffer name and shape.
  void load_model(torch::nn::Module& model) const;
  // Loads the optimizer's state with its tensors on `device` (the one its
  // parameters are on). Throws CheckpointError when it does not fit.
  void load_optimizer(torch::optim::Optimizer& optimizer, const torch::Device& device) const;
  // The stored weights by dotted name ("fc1.weight"), on the CPU, in archive order.
  std::vector<std::pair<std::string, torch::Tensor>> weights() const;

 private:
  std::string name_;
  TrainingState state_;
  std::shared_ptr<const std::string> payload_;             // for load_optimizer onto another device
  std::shared_ptr<torch::serialize::InputArchive> model_;  // format 1's model tree; null: lists in payload_
};

}  // namespace gputrain::checkpoint
