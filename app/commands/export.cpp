#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/export/export_model.h"
#include "gputrain/export/export_weights.h"
#include "gputrain/plan/start.h"

namespace gputrain::app {

namespace {

int export_model(const ExportArgs& args, checkpoint::ExportedWeights weights) {
  exporting::ModelExportOptions options;
  options.format = args.format == "onnx" ? exporting::ModelFormat::kOnnx : exporting::ModelFormat::kPytorch;
  options.weights = weights;
  options.force = args.force;
  options.config_files = args.config;
  options.write_hooks = args.write_hooks;
  options.inputs = args.normalize_inputs ? exporting::ModelInputs::kUnitImages : exporting::ModelInputs::kNormalized;
  plan::StartRequest request;
  request.purpose = plan::Purpose::kExport;
  request.command = "export";
  request.config_files = args.config;
  request.overrides = args.overrides;
  request.weights = args.checkpoint;
  const plan::RunPlan plan = plan::start_run(request).run;
  const exporting::ModelExportSummary summary = exporting::export_model(plan, args.checkpoint, args.out, options);
  spdlog::info("wrote {} ({} parameters), {}, from {}; its input: {}", fmt::join(summary.files, " and "),
               summary.parameters, summary.weights, args.checkpoint, summary.input);
  return 0;
}

}  // namespace

int run_export(const ExportArgs& args) {
  checkpoint::ExportedWeights weights = checkpoint::ExportedWeights::kEvaluated;
  if (!args.weights.empty()) {
    weights = args.weights == "ema" ? checkpoint::ExportedWeights::kAverage : checkpoint::ExportedWeights::kLive;
  }
  if (args.format == "onnx" || args.format == "pytorch") return export_model(args, weights);
  if (!args.config.empty() || !args.overrides.empty() || !args.normalize_inputs) {
    throw UserError(
        "--config, --set and --no-normalize-inputs describe the network of --format onnx or pytorch; a state_dict "
        "or safetensors file holds the weights alone: leave them out, or add --format onnx or pytorch");
  }
  exporting::ExportOptions options;
  options.force = args.force;
  options.weights = weights;
  const bool safetensors = args.format == "safetensors";
  options.format = safetensors ? exporting::WeightsFormat::kSafetensors : exporting::WeightsFormat::kStateDict;
  const exporting::ExportSummary summary = exporting::export_weights(args.checkpoint, args.out, options);
  spdlog::info("wrote {} tensors ({} values), {}, from {} to {}; in Python: {}('{}') returns the state_dict",
               summary.tensors, summary.elements, summary.weights, args.checkpoint, args.out,
               safetensors ? "safetensors.torch.load_file" : "torch.load", args.out);
  return 0;
}

}  // namespace gputrain::app
