#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/checkpoint/resume.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::app {

namespace {
// --config, or the config a checkpoint file holds (with --set on top).
config::LoadedConfig test_config(const TestArgs& args) {
  if (!args.config.empty()) return config::load_config(args.config, args.overrides);
  // (A missing file is left to the checkpoint reader, which says so.)
  if (std::filesystem::is_regular_file(args.checkpoint) && !checkpoint::is_checkpoint_file(args.checkpoint)) {
    throw UserError(
        fmt::format("{} holds weights only, not the config they were trained with: give --config (the "
                    "run's config.yaml), or test a checkpoint file, which holds its config",
                    args.checkpoint));
  }
  return checkpoint::resolve_resume(args.checkpoint, std::nullopt, args.overrides).config;
}
}  // namespace

int run_test(const TestArgs& args) {
  const config::LoadedConfig loaded = test_config(args);
  const device::DevicePlan devices =
      device::resolve_devices(loaded, device::probe_devices(args.env.cuda_visible_devices));
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);
  const train::EvalResult result = train::evaluate_saved_weights(loaded, devices, args.checkpoint);
  std::cout << train::format_test_line(result) << "\n";
  for (const auto& line : train::format_class_lines(result)) std::cout << line << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace gputrain::app
