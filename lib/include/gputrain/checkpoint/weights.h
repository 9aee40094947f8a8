#pragma once
// Weights alone: the model.pt a run ends with, and the export Python reads.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>

namespace gputrain::checkpoint {

// Writes the model's weights atomically (see write_atomically), in LibTorch's
// archive format (Module::save).
void save_weights(const torch::nn::Sequential& model, const std::string& path);

// Loads weights into `model` from a model.pt or from a full checkpoint (its
// train.ema weight average when it has one, as its evaluations used); throws
// CheckpointError naming the file when it is missing, corrupt or for another model.
void load_weights(torch::nn::Sequential& model, const std::string& path);

struct ExportSummary {
  int64_t tensors = 0;
  int64_t elements = 0;
};

// Writes the weights of `checkpoint_path` (a checkpoint or a model.pt) to
// `out_path` as a pickled dict of name -> tensor, on the CPU: Python's
// torch.load(out_path) returns it as a state_dict, without gputrain.
ExportSummary export_weights(const std::string& checkpoint_path, const std::string& out_path);

}  // namespace gputrain::checkpoint
