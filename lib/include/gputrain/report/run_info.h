#pragma once
// run.json: what a run is, written when training starts and again when it
// ends, so a report can be made from the run directory alone, also of a run
// that crashed (its status then stays "running").
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/choices.h"
#include "gputrain/config/config.h"
#include "gputrain/parallel/split.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/trainer.h"

namespace gputrain::report {

// How far a run got: running until it ends (a run that crashed stays so).
enum class RunStatus { kRunning, kFinished, kFailed, kInterrupted };
inline constexpr config::ChoiceTable<RunStatus, 4> kRunStatuses{{{{"running", RunStatus::kRunning},
                                                                  {"finished", RunStatus::kFinished},
                                                                  {"failed", RunStatus::kFailed},
                                                                  {"interrupted", RunStatus::kInterrupted}}}};
constexpr const auto& choices(RunStatus) { return kRunStatuses; }

// What the data set's targets make of the run.
enum class Task { kClassification, kRegression, kUnlabeled };
inline constexpr config::ChoiceTable<Task, 3> kTasks{
    {{{"classification", Task::kClassification}, {"regression", Task::kRegression}, {"unlabeled", Task::kUnlabeled}}}};
constexpr const auto& choices(Task) { return kTasks; }

// Its fields are declared once, in run_info.cpp's visit(), which writes and reads them.
struct RunInfo {
  std::string name;
  std::string started;  // local time, "2025-01-31 14:05:09"
  std::string ended;    // empty while running
  RunStatus status = RunStatus::kRunning;
  std::string error;     // failed or interrupted: the message
  std::string device;    // the primary device
  std::string strategy;  // single | dp | ddp
  std::string strategy_reason;
  std::vector<std::string> replicas;     // single: the device; dp: one per replica; ddp: "rank N" per process
  std::optional<Task> task;              // unset in a run.json that does not say
  std::vector<std::string> class_names;  // index -> name; empty where the data set has none (or an older run.json)
  config::AmpMode amp = config::AmpMode::kOff;
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  int64_t train_samples = 0;
  int64_t batch_size = 0;  // per optimizer step, all replicas together
  int64_t accumulation_steps = 1;
  int64_t micro_batch = 0;
  int64_t last_micro_batch = 0;
  // dp and ddp: how a full micro-batch and the epoch's last one are shared.
  std::vector<parallel::ReplicaSplit> full_split;
  std::vector<parallel::ReplicaSplit> last_split;
  double target_accuracy = 0;                  // train.target_accuracy; 0: none
  std::optional<train::TargetReached> target;  // when it was reached
  std::string ended_early;                     // why an evaluation ended training before `epochs`
};

// What run.json records of the run's settings.
struct RunSettings {
  std::string name;
  config::AmpMode amp = config::AmpMode::kOff;
  int64_t epochs = 0;
  double target_accuracy = 0;
};
RunSettings run_settings(const plan::RunPlan& run);

// "single", "dp" or "ddp", as run.json and `gputrain plan` say it.
std::string strategy_name(parallel::StrategyKind kind);

// Started now, status "running".
RunInfo describe_run(const RunSettings& settings, const plan::TrainLayout& layout);
// Sets how the run ended (finished, failed or interrupted), and when.
void end_run(RunInfo& info, RunStatus status, const std::string& error = "");
// What a finished run's summary adds: the target reached, and why it ended early.
void record_outcome(RunInfo& info, const train::TrainSummary& summary);

// Written atomically (temporary file, then rename); throws Error when it cannot be.
void write_run_info(const std::filesystem::path& path, const RunInfo& info);
// Throws UserError when the file is missing or not a run.json.
RunInfo read_run_info(const std::filesystem::path& path);

}  // namespace gputrain::report
