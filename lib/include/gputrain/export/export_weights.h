#pragma once
// `gputrain export --format state_dict|safetensors`: a checkpoint's or
// weights file's tensors written for Python, which reads either without
// gputrain (torch.load, safetensors' load_file).
#include <cstdint>
#include <string>

#include "gputrain/checkpoint/weights.h"

namespace gputrain::exporting {

enum class WeightsFormat {
  kStateDict,    // a pickled dict of name -> tensor: Python's torch.load(path) returns it
  kSafetensors,  // safetensors (checkpoint/safetensors.h), with __metadata__ {"format": "pt", "weights": which ones}
};

struct ExportOptions {
  checkpoint::ExportedWeights weights = checkpoint::ExportedWeights::kEvaluated;
  bool force = false;  // replace an existing output file
  WeightsFormat format = WeightsFormat::kStateDict;
};

struct ExportSummary {
  int64_t tensors = 0;
  int64_t elements = 0;
  std::string weights;  // which weights were written, for the user: "the train.ema weight average", ...
};

// Writes the weights of `checkpoint_path` (a checkpoint, a model.pt or a
// .safetensors file; checkpoint::read_chosen_weights says which) to
// `out_path` in `options.format`, under the model's state-dict keys.
// `out_path` may not be the checkpoint, and replaces an existing file only
// with `force` (check_output_file); it is written whole or not at all.
ExportSummary export_weights(const std::string& checkpoint_path, const std::string& out_path,
                             const ExportOptions& options);

}  // namespace gputrain::exporting
