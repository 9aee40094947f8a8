#pragma once
// The optimizer's state in a checkpoint as flat lists: LibTorch's
// Optimizer::save gives each parameter an archive of its own (and its group
// an entry "params/i" per parameter), and every entry added to or read from an
// archive is looked up among those before it, so saving and loading took
// time in the number of parameters squared (see write_weight_lists).
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <string>

namespace gputrain::checkpoint::detail {

// Writes the optimizer's kind ("sgd", "adam", "adamw"), each parameter
// group's options and size, and each parameter's state, one list per field.
// InternalError for an optimizer of another kind.
void write_optimizer_lists(torch::serialize::OutputArchive& root, const torch::optim::Optimizer& optimizer);

// Whether `root` holds what write_optimizer_lists writes (format version 2 on).
bool has_optimizer_lists(torch::serialize::InputArchive& root);

// Restores what write_optimizer_lists wrote into `optimizer`, whose groups
// and parameters must be those it was written from (same kind, same group
// sizes, same shapes): CheckpointError otherwise, `name` (the file) first.
void read_optimizer_lists(torch::serialize::InputArchive& root, torch::optim::Optimizer& optimizer,
                          const std::string& name);

}  // namespace gputrain::checkpoint::detail
