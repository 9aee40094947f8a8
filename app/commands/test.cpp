#include <spdlog/spdlog.h>

#include <iostream>

#include "commands.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/train/trainer.h"

namespace gputrain::app {

int run_test(const TestArgs& args) {
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
  const device::DevicePlan devices =
      device::resolve_devices(loaded, device::probe_devices(args.env.cuda_visible_devices));
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);
  const train::EvalResult result = train::test_weights(loaded, devices, args.checkpoint);
  std::cout << train::format_test_line(result) << std::endl;
  return 0;
}

}  // namespace gputrain::app
