#include "gputrain/plan/run_plan.h"

#include <spdlog/spdlog.h>

#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/step/amp.h"

namespace gputrain::plan {

namespace {

// Strict (no list): a part's problem throws. Collecting: it is listed, each of
// a config's errors on a line, and the part reports that it was refused.
class Problems {
 public:
  explicit Problems(std::vector<std::string>* collected) : collected_(collected) {}

  bool collecting() const { return collected_ != nullptr; }

  template <class Part>
  bool attempt(Part&& part) {
    if (collected_) return config::collect_refusal(*collected_, part);
    part();
    return true;
  }

 private:
  std::vector<std::string>* collected_;
};

// Everything after the devices; `run` holds the config and the devices.
Reached resolve_on_devices(RunPlan& run, const RunRequest& request, Problems& problems) {
  run.processes = request.one_process
                      ? parallel::ProcessPlan{0, "one process"}
                      : parallel::plan_processes(run.loaded, run.devices, request.launch, request.nproc);
  run.launch = request.launch;
  const int64_t workers = run.processes.workers;
  if (workers > 0) {  // what each worker will resolve for itself; this process stands for rank 0
    run.launch.rank = 0;
    run.launch.local_rank = 0;
    run.launch.world_size = workers;
  }
  problems.attempt([&] { config::resolve_batch_forms(run.loaded, run.launch.world_size); });
  run.strategy.replicas = {run.devices.primary()};  // single, should the strategy be refused
  const bool strategy_known = problems.attempt([&] {
    if (workers > 0) {
      run.worker_strategies = parallel::check_local_workers(run.loaded, run.devices, workers);
      run.strategy = run.worker_strategies.front();
    } else {
      run.strategy = parallel::plan_strategy(run.loaded, run.devices, run.launch);
    }
  });
  // A refused train.amp is said once; the batch is then measured without it.
  config::ExperimentConfig& c = run.loaded.config;
  if (!problems.attempt([&] {
        step::check_amp_device(c.train.amp, run.devices.primary().type(), run.loaded.sources.at("train.amp"));
      })) {
    c.train.amp = config::AmpMode::kOff;
  }
  const Reached after_strategy = strategy_known ? Reached::kStrategy : Reached::kDevices;
  // A process that only starts workers reads the data only for data.batch_size: auto's measurement.
  const bool launcher_only = workers > 0 && !problems.collecting();
  if (launcher_only && c.data.batch_size) return after_strategy;

  if (!problems.attempt([&] { run.train_set = data::make_dataset(c.data, data::Split::kTrain, c.seed); })) {
    return after_strategy;
  }
  if (!launcher_only && run.train_set->info().target_kind != data::TargetKind::kNone) {
    problems.attempt([&] { run.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed); });
  }
  if (!strategy_known) return after_strategy;
  if (!problems.attempt([&] {
        run.batch_choice = solve_batch(run.loaded, run.train_set, run.strategy, run.launch.world_size, request.meminfo);
      })) {
    return Reached::kData;
  }
  if (run.batch_choice) {
    spdlog::info("data.batch_size: {} (auto: {})", run.batch_choice->batch_size, run.batch_choice->describe());
  }
  run.batch = plan_batches(c.data, c.train.accumulation_steps, run.train_set->info().samples);
  return Reached::kComplete;
}

// The devices, then everything after them.
Reached resolve(RunPlan& run, config::LoadedConfig loaded, const RunRequest& request, Problems& problems) {
  // Collecting, the CPU stands in should `device:` or `gpus:` be refused.
  problems.attempt([&] { run.devices = device::resolve_devices(loaded, request.inventory); });
  run.loaded = std::move(loaded);
  return resolve_on_devices(run, request, problems);
}

}  // namespace

RunPlan resolve_run(config::LoadedConfig loaded, const RunRequest& request) {
  RunPlan run;
  Problems strict(nullptr);
  resolve(run, std::move(loaded), request, strict);
  return run;
}

RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo) {
  RunPlan run;
  run.devices = devices;
  run.loaded = std::move(loaded);
  RunRequest request;
  request.launch = launch;
  request.meminfo = meminfo;
  request.one_process = true;
  Problems strict(nullptr);
  resolve_on_devices(run, request, strict);
  return run;
}

CollectedRun collect_run(config::LoadedConfig loaded, const RunRequest& request) {
  CollectedRun out;
  Problems problems(&out.problems);
  out.reached = resolve(out.plan, std::move(loaded), request, problems);
  return out;
}

}  // namespace gputrain::plan
