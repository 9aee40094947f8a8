#include <spdlog/spdlog.h>

#include <iostream>

#include "commands.h"
#include "gputrain/plan/start.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::app {

plan::RunPlan saved_weights_plan(plan::Purpose purpose, const std::string& command, const SavedWeightsArgs& args) {
  plan::StartRequest request;
  request.purpose = purpose;
  request.command = command;
  request.config_files = args.config;
  request.overrides = args.overrides;
  request.weights = args.checkpoint;
  request.run_views = args.tta == "run";
  request.cuda_visible_devices = args.env.cuda_visible_devices;
  plan::RunPlan plan = plan::start_run(request).run;
  spdlog::info("device: {} ({})", plan.devices.primary().str(), plan.devices.reason);
  return plan;
}

int run_test(const TestArgs& args) {
  const plan::RunPlan plan = saved_weights_plan(plan::Purpose::kEvaluate, "test", args);
  const step::EvalResult result = train::evaluate_saved_weights(plan, args.checkpoint);
  std::cout << train::format_test_line(result) << "\n";
  for (const auto& line : train::format_class_lines(result)) std::cout << line << "\n";
  return 0;
}

}  // namespace gputrain::app
