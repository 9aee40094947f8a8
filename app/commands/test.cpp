#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "commands.h"
#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/device/resolve.h"
#include "gputrain/train/trainer.h"

namespace gputrain::app {

namespace {
// --config, or the config a .ckpt holds (--set on top), as `train --resume PATH` does.
config::LoadedConfig test_config(const TestArgs& args) {
  if (!args.config.empty()) return config::load_config(args.config, args.overrides);
  if (const std::string problem = not_a_regular_file(args.checkpoint); !problem.empty()) {
    throw CheckpointError(fmt::format("{}: {}", args.checkpoint, problem));
  }
  std::ifstream in(args.checkpoint, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (!checkpoint::is_sealed(head)) {
    throw UserError(fmt::format("test needs --config FILE: {} is not a checkpoint (.ckpt) holding its config; "
                                "a model.pt holds only the weights",
                                args.checkpoint));
  }
  const checkpoint::Checkpoint ckpt = checkpoint::Checkpoint::read(args.checkpoint);
  return config::load_config_text(ckpt.state().config, ckpt.name() + " (its config)", args.overrides);
}
}  // namespace

int run_test(const TestArgs& args) {
  const config::LoadedConfig loaded = test_config(args);
  const device::DevicePlan devices =
      device::resolve_devices(loaded, device::probe_devices(args.env.cuda_visible_devices));
  spdlog::info("device: {} ({})", devices.primary().str(), devices.reason);
  const train::EvalResult result = train::test_weights(loaded, devices, args.checkpoint);
  std::cout << train::format_test_line(result) << std::endl;
  return 0;
}

}  // namespace gputrain::app
