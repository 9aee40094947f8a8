#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/checkpoint/resume.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::app {

config::LoadedConfig weights_config(const ConfigFiles& config, const std::string& checkpoint,
                                    const std::vector<std::string>& overrides) {
  if (!config.empty()) return config::load_config(config, overrides);
  // (A missing or foreign file is left to the checkpoint reader, which says what it is.)
  std::error_code unreadable;  // a symbolic link loop, say: the reader names it too
  if (std::filesystem::is_regular_file(checkpoint, unreadable) && checkpoint::is_weights_archive(checkpoint)) {
    throw UserError(
        fmt::format("{} holds weights only, not the config they were trained with: give --config (the "
                    "run's config.yaml), or use a checkpoint file, which holds its config",
                    checkpoint));
  }
  return checkpoint::resolve_resume(checkpoint, std::nullopt, overrides).config;
}

int run_test(const TestArgs& args) {
  const plan::SavedWeightsPlan plan =
      plan::resolve_saved_weights(weights_config(args.config, args.checkpoint, args.overrides),
                                  device::probe_devices(args.env.cuda_visible_devices), plan::WeightsUse::kTest,
                                  {args.checkpoint, args.tta == "run"});
  spdlog::info("device: {} ({})", plan.devices.primary().str(), plan.devices.reason);
  const step::EvalResult result = train::evaluate_saved_weights(plan, args.checkpoint);
  std::cout << train::format_test_line(result) << "\n";
  for (const auto& line : train::format_class_lines(result)) std::cout << line << "\n";
  return 0;
}

}  // namespace gputrain::app
