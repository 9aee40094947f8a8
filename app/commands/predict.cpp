#include <spdlog/spdlog.h>

#include <iostream>
#include <sstream>

#include "commands.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "gputrain/device/probe.h"
#include "gputrain/train/predict.h"

namespace gputrain::app {

int run_predict(const PredictArgs& args) {
  if (!args.out.empty()) {
    std::vector<NamedPath> inputs{{"--checkpoint", args.checkpoint}, {"--input", args.input}};
    for (const std::string& file : args.config) inputs.push_back({"--config", file});
    check_output_file(args.out, inputs, args.force);
  }
  const plan::SavedWeightsPlan plan =
      plan::resolve_saved_weights(weights_config(args.config, args.checkpoint, args.overrides),
                                  device::probe_devices(args.env.cuda_visible_devices), plan::WeightsUse::kPredict,
                                  {args.checkpoint, args.tta == "run"});
  spdlog::info("device: {} ({})", plan.devices.primary().str(), plan.devices.reason);
  if (args.out.empty()) {
    train::predict(plan, args.checkpoint, args.input, std::cout);
    return 0;
  }
  // Whole or not at all: an earlier predictions file survives a failure.
  std::ostringstream rows;
  train::predict(plan, args.checkpoint, args.input, rows);
  write_atomically(args.out, rows.str());
  spdlog::info("predictions: {}", args.out);
  return 0;
}

}  // namespace gputrain::app
