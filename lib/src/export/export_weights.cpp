#include "gputrain/export/export_weights.h"

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"

namespace gputrain::exporting {

ExportSummary export_weights(const std::string& checkpoint_path, const std::string& out_path,
                             const ExportOptions& options) {
  check_output_file(out_path, {{"--checkpoint", checkpoint_path}}, options.force);
  checkpoint::ChosenWeights chosen = checkpoint::read_chosen_weights(checkpoint_path, options.weights);
  ExportSummary summary;
  summary.weights = chosen.weights;
  for (const auto& [name, tensor] : chosen.tensors) {
    ++summary.tensors;
    summary.elements += tensor.numel();
  }
  if (options.format == WeightsFormat::kSafetensors) {
    write_atomically(out_path, checkpoint::safetensors_bytes(
                                   {std::move(chosen.tensors), {{"format", "pt"}, {"weights", summary.weights}}}));
    return summary;
  }
  write_atomically(out_path, checkpoint::state_dict_bytes(chosen.tensors));
  return summary;
}

}  // namespace gputrain::exporting
