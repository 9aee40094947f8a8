#pragma once
// Weights alone: the model.pt a run ends with, and the export Python reads.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain::checkpoint {

// Writes the model's weights atomically (see write_atomically), in LibTorch's
// archive format (Module::save), with `training_data` (data::model_description's
// text) beside them when it is not empty.
void save_weights(const torch::nn::Sequential& model, const std::string& path, std::string_view training_data = {});

// The description of the training data that `path` (a checkpoint or a
// model.pt) carries, as data::model_description wrote it; "" for a file
// without one: written before gputrain kept it, a state dict or a
// .safetensors file. Throws CheckpointError as read_weights does.
std::string stored_training_data(const std::string& path);

// Which of a checkpoint's weights an export writes (`export --weights`).
enum class ExportedWeights {
  kEvaluated,  // what test, predict and the logged metrics use: the train.ema average when the run kept one
  kLive,       // the weights the optimizer updates
  kAverage,    // the train.ema average; refused when there is none
};

// Loads weights into `model` from a model.pt, a .safetensors file (by its
// content; export --format safetensors writes one), a state dict (as
// read_weights) or from a full checkpoint (by
// default its train.ema weight average when it has one, as its evaluations
// used); throws CheckpointError naming the file when it is missing, corrupt
// or for another model, or when it lacks the weights asked for. Returns which
// weights it loaded, for the user: "the train.ema weight average (...)", ...
std::string load_weights(torch::nn::Sequential& model, const std::string& path,
                         ExportedWeights weights = ExportedWeights::kEvaluated);

// A weights file's tensors by name, on the CPU, in the file's order.
struct NamedWeights {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::string what;  // which weights, for the user: "a gputrain checkpoint: the train.ema weight average (...)"
};

// The weights of any file load_weights reads, and of a state dict (a
// torch.save zip of a dict of name -> tensor: `gputrain export`'s, or
// torch.save(model.state_dict(), path) from Python), told apart by content; a
// checkpoint gives its evaluated weights (the train.ema average when it has
// one). No model is needed: model.init_from matches them to one. A missing,
// cut-short or foreign file (an ONNX model, anything else) is a CheckpointError
// naming it and the files it may be.
NamedWeights read_weights(const std::string& path);

// Renames `tensors` to `model`'s names by position, where some name is not
// the model's but the two line up tensor for tensor: as many parameters and
// as many buffers, each at its place (modules in pre-order) with the same
// shape and the same last name part (weight, running_mean, ...). That is the
// same network under other layer names, such as a checkpoint of
// configs/resnet18_folder.yaml from before it took torchvision's names
// (res1.layers.conv2 is now layer1.0.conv1). Returns the (old, new) pairs
// renamed; empty, with `tensors` untouched, when every name is the model's
// already or they do not line up.
std::vector<std::pair<std::string, std::string>> rename_by_position(
    std::vector<std::pair<std::string, torch::Tensor>>& tensors, const torch::nn::Module& model);

// The log line of a rename_by_position of `file`'s tensors: every pair, old -> new.
std::string renamed_text(const std::string& file, const std::vector<std::pair<std::string, std::string>>& renamed);

// Copies each of `tensors` into the model's parameter or buffer of that name,
// which must exist in that shape (the plan matched them: model.init_from).
void load_named_weights(torch::nn::Module& model, const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

// The model's parameters and buffers as the file Python's torch.load reads as
// a state_dict (a pickled dict of name -> tensor, on the CPU), its keys the
// model's names.
std::string state_dict_bytes(const torch::nn::Module& model);
// The same of named tensors, in their order (export/export_weights.h writes them).
std::string state_dict_bytes(const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

// The weights `path` (a checkpoint, a model.pt or a .safetensors file) holds,
// as `which` chooses them, on the CPU under the model's state-dict keys: what
// `gputrain export --format state_dict|safetensors` writes. A model.pt or
// .safetensors file holds one set, the evaluated weights, so kLive and
// kAverage need a checkpoint (CheckpointError otherwise, or for an average
// the checkpoint does not hold).
struct ChosenWeights {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  std::string weights;  // which ones, for the user: "the train.ema weight average", ...
};
ChosenWeights read_chosen_weights(const std::string& path, ExportedWeights which);

}  // namespace gputrain::checkpoint
