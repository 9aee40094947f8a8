#include <spdlog/spdlog.h>

#include <iostream>
#include <sstream>

#include "commands.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/train/predict.h"

namespace gputrain::app {

int run_predict(const PredictArgs& args) {
  if (!args.out.empty()) {
    check_output_file(args.out, {{"--checkpoint", args.checkpoint}, {"--input", args.input}, {"--config", args.config}},
                      args.force);
  }
  const config::LoadedConfig loaded = weights_config(args.config, args.checkpoint, args.overrides);
  const device::DevicePlan devices =
      device::resolve_devices(loaded, device::probe_devices(args.env.cuda_visible_devices));
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);
  if (args.out.empty()) {
    train::predict(loaded, devices, args.checkpoint, args.input, std::cout);
    std::cout.flush();
    return 0;
  }
  // Whole or not at all: an earlier predictions file survives a failure.
  std::ostringstream rows;
  train::predict(loaded, devices, args.checkpoint, args.input, rows);
  write_atomically(args.out, rows.str());
  spdlog::info("predictions: {}", args.out);
  return 0;
}

}  // namespace gputrain::app
