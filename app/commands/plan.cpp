#include <CLI/CLI.hpp>
#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/report/dry_run.h"

namespace gputrain::app {

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
  auto* plan =
      app.add_subcommand("plan",
                         "say everything train would decide (devices, strategy, batches, fast paths, memory) and every "
                         "problem that would stop it, without training; exit 2 when there is any");
  add_config_options(plan, args.config, args.overrides, /*required=*/false);  // --resume FILE holds one
  plan->add_option("--nproc", args.nproc, "plan the N local workers train --nproc N would start")
      ->check(whole_number(1, 1024));
  plan->add_option("--resume", args.resume,
                   "plan what train --resume would run: 'auto' (the default when no value is given: the newest "
                   "valid checkpoint of the run --config names) or a checkpoint file, whose config and batch it "
                   "continues with, --set on top")
      ->expected(0, 1)
      ->default_str("auto");
  plan->add_flag("--json", args.json, "print the plan as one JSON object, problems under \"problems\"");
  return plan;
}

int run_plan(const PlanArgs& args) {
  plan::StartRequest request;
  request.purpose = plan::Purpose::kTrain;
  request.command = "plan";
  request.config_files = args.config;
  request.overrides = args.overrides;
  request.resume = args.resume;
  request.nproc = args.nproc;
  request.launch = launch_info(args.env);
  request.restarts = restarts(args.env, request.launch);
  request.cuda_visible_devices = args.env.cuda_visible_devices;
  request.launcher_batch = launcher_batch(args.env);
  const report::DryRun dry = report::dry_run(plan::collect_start(request));
  if (args.json) {
    nlohmann::ordered_json out = dry.report;
    out["problems"] = dry.problems;
    std::cout << out.dump() << std::endl;
  } else {
    std::cout << report::format_dry_run(dry) << std::flush;
  }
  return dry.problems.empty() ? 0 : static_cast<int>(ExitCode::kUserInput);
}

}  // namespace gputrain::app
