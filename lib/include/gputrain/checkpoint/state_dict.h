#pragma once
// State dicts as torch.save writes them: a zip holding data.pkl (a pickle,
// protocol 2, of a dict of name -> tensor) and each tensor's storage as a
// record under data/. LibTorch's own unpickler (torch::jit::pickle_load) turns
// the OrderedDict a Python state_dict is into None and refuses the BUILD of
// its _metadata, so a state dict saved from Python could not be read with it.
#include <c10/util/Exception.h>
#include <torch/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"

namespace caffe2::serialize {
class PyTorchStreamReader;
}  // namespace caffe2::serialize

namespace gputrain::checkpoint {

using NamedTensorList = std::vector<std::pair<std::string, torch::Tensor>>;

// The tensors of the state dict in `zip` (a zip as torch.save writes, opened
// once by the caller, who has asked it what it holds), in the dict's order, on the CPU. Reads the opcodes
// Python's pickler writes for dicts, OrderedDicts, tuples, numbers, text and
// tensors (torch._utils._rebuild_tensor_v2 over a persistent storage id),
// and nothing that runs code. Anything else, a dict holding something other
// than tensors under text keys, or a file cut short, is a CheckpointError
// naming `path` and what it found.
NamedTensorList read_state_dict(caffe2::serialize::PyTorchStreamReader& zip, const std::string& path);

// A storage record's bytes by its name in the zip ("data/0"); nullopt when absent.
using StorageRecord = std::function<std::optional<std::string>(const std::string&)>;
// read_state_dict's pickle machine alone, on data.pkl's bytes, with the
// storages from `record`: the fuzz target's entry point.
NamedTensorList unpickle_state_dict(std::string_view pickle, const StorageRecord& record, const std::string& path);

namespace detail {
// The CheckpointError for a zip archive (a state dict, a model.pt) that its
// reader refused: cut short or damaged.
CheckpointError unreadable_zip(const std::string& path, const c10::Error& error);
}  // namespace detail

}  // namespace gputrain::checkpoint
