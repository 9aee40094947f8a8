#pragma once
// State dicts as torch.save writes them: a zip holding data.pkl (a pickle,
// protocol 2, of a dict of name -> tensor) and each tensor's storage as a
// record under data/. LibTorch's own unpickler (torch::jit::pickle_load) turns
// the OrderedDict a Python state_dict is into None and refuses the BUILD of
// its _metadata, so a state dict saved from Python could not be read with it.
#include <string>

#include "gputrain/common/error.h"
#include "module_io.h"

namespace gputrain::checkpoint::detail {

// The tensors of the state dict whose file bytes are `bytes` (a zip as
// torch.save writes), in the dict's order, on the CPU. Reads the opcodes
// Python's pickler writes for dicts, OrderedDicts, tuples, numbers, text and
// tensors (torch._utils._rebuild_tensor_v2 over a persistent storage id),
// and nothing that runs code. Anything else, a dict holding something other
// than tensors under text keys, or a file cut short, is a CheckpointError
// naming `path` and what it found.
NamedTensors read_state_dict(const std::string& bytes, const std::string& path);

// The CheckpointError for a zip archive (a state dict, a model.pt) that its
// reader refused: cut short or damaged.
CheckpointError unreadable_zip(const std::string& path, const c10::Error& error);

}  // namespace gputrain::checkpoint::detail
