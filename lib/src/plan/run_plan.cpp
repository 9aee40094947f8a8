#include "gputrain/plan/run_plan.h"

#include <spdlog/spdlog.h>

#include "gputrain/config/load.h"

namespace gputrain::plan {

RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo) {
  RunPlan run;
  config::resolve_batch_forms(loaded, launch.world_size);
  const config::ExperimentConfig& c = loaded.config;
  run.strategy = parallel::plan_strategy(loaded, devices, launch);
  run.train_set = data::make_dataset(c.data, data::Split::kTrain, c.seed);
  if (run.train_set->info().target_kind != data::TargetKind::kNone) {
    run.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed);
  }
  run.batch_choice = solve_batch(loaded, run.train_set, run.strategy, launch.world_size, meminfo);
  if (run.batch_choice) {
    spdlog::info("data.batch_size: {} (auto: {})", run.batch_choice->batch_size, run.batch_choice->describe());
  }
  run.batch = plan_batches(c.data, c.train.accumulation_steps, run.train_set->info().samples);
  run.loaded = std::move(loaded);
  run.devices = devices;
  run.launch = launch;
  return run;
}

}  // namespace gputrain::plan
