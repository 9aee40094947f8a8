#include <spdlog/spdlog.h>

#include "commands.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/train/export_onnx.h"

namespace gputrain::app {

namespace {

int export_onnx(const ExportArgs& args, checkpoint::ExportedWeights weights) {
  train::OnnxExportOptions options;
  options.weights = weights;
  options.force = args.force;
  options.inputs = args.normalize_inputs ? train::OnnxInputs::kUnitImages : train::OnnxInputs::kNormalized;
  const plan::SavedWeightsPlan plan = plan::resolve_saved_weights(
      weights_config(args.config, args.checkpoint, args.overrides), {}, plan::WeightsUse::kExport);
  const train::OnnxExportSummary summary = train::export_onnx(plan, args.checkpoint, args.out, options);
  spdlog::info("wrote {} ({} nodes, {} parameters), {}, from {}; its input: {}", args.out, summary.nodes,
               summary.parameters, summary.weights, args.checkpoint, summary.input);
  return 0;
}

}  // namespace

int run_export(const ExportArgs& args) {
  checkpoint::ExportedWeights weights = checkpoint::ExportedWeights::kEvaluated;
  if (!args.weights.empty()) {
    weights = args.weights == "ema" ? checkpoint::ExportedWeights::kAverage : checkpoint::ExportedWeights::kLive;
  }
  if (args.format == "onnx") return export_onnx(args, weights);
  if (!args.config.empty() || !args.overrides.empty() || !args.normalize_inputs) {
    throw UserError(
        "--config, --set and --no-normalize-inputs describe the network of --format onnx; a state_dict holds the "
        "weights alone: leave them out, or add --format onnx");
  }
  checkpoint::ExportOptions options;
  options.force = args.force;
  options.weights = weights;
  const checkpoint::ExportSummary summary = checkpoint::export_weights(args.checkpoint, args.out, options);
  spdlog::info("wrote {} tensors ({} values), {}, from {} to {}; in Python: torch.load('{}') returns the state_dict",
               summary.tensors, summary.elements, summary.weights, args.checkpoint, args.out, args.out);
  return 0;
}

}  // namespace gputrain::app
