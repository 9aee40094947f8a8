#include <spdlog/spdlog.h>

#include "commands.h"
#include "gputrain/checkpoint/weights.h"

namespace gputrain::app {

int run_export(const ExportArgs& args) {
  checkpoint::ExportOptions options;
  options.force = args.force;
  if (!args.weights.empty()) {
    options.weights =
        args.weights == "ema" ? checkpoint::ExportedWeights::kAverage : checkpoint::ExportedWeights::kLive;
  }
  const checkpoint::ExportSummary summary = checkpoint::export_weights(args.checkpoint, args.out, options);
  spdlog::info("wrote {} tensors ({} values), {}, from {} to {}; in Python: torch.load('{}') returns the state_dict",
               summary.tensors, summary.elements, summary.weights, args.checkpoint, args.out, args.out);
  return 0;
}

}  // namespace gputrain::app
