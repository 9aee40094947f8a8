#include "gputrain/report/run_info.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/report/run_dir.h"
#include "record_fields.h"

namespace gputrain::report {

namespace {

std::string local_time_now() { return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::time(nullptr))); }

}  // namespace

std::string strategy_name(parallel::StrategyKind kind) {
  switch (kind) {
    case parallel::StrategyKind::kSingle:
      return "single";
    case parallel::StrategyKind::kDataParallel:
      return "dp";
    case parallel::StrategyKind::kDistributed:
      return "ddp";
  }
  return "single";
}

RunSettings run_settings(const plan::RunPlan& run) {
  return {run.name, run.step.amp, run.loop.epochs, run.evaluation.stop.target_accuracy};
}

RunInfo describe_run(const RunSettings& settings, const plan::TrainLayout& layout) {
  RunInfo info;
  info.name = settings.name;
  info.started = local_time_now();
  info.device = layout.strategy.replicas.empty() ? "cpu" : layout.strategy.replicas.front().str();
  info.strategy = strategy_name(layout.strategy.kind);
  info.strategy_reason = layout.strategy.reason;
  if (layout.strategy.kind == parallel::StrategyKind::kDistributed) {
    for (int64_t rank = 0; rank < layout.world_size; ++rank) info.replicas.push_back(fmt::format("rank {}", rank));
  } else {
    for (const auto& device : layout.strategy.replicas) info.replicas.push_back(device.str());
  }
  info.task = !layout.labeled ? Task::kUnlabeled : layout.classification ? Task::kClassification : Task::kRegression;
  if (layout.classification) info.class_names = layout.class_names;
  info.amp = settings.amp;
  info.epochs = settings.epochs;
  info.steps_per_epoch = layout.batch.steps_per_epoch;
  info.train_samples = layout.train_samples;
  info.batch_size = layout.batch.global;
  info.accumulation_steps = layout.batch.accumulation;
  info.target_accuracy = settings.target_accuracy;
  info.micro_batch = layout.batch.micro;
  info.last_micro_batch = layout.batch.last_micro;
  if (layout.strategy.kind != parallel::StrategyKind::kSingle) {
    info.full_split = parallel::split_batch(layout.batch.micro, info.replicas);
    info.last_split = parallel::split_batch(layout.batch.last_micro, info.replicas);
  }
  return info;
}

void end_run(RunInfo& info, RunStatus status, const std::string& error) {
  info.status = status;
  info.error = error;
  info.ended = local_time_now();
}

void record_outcome(RunInfo& info, const train::TrainSummary& summary) {
  info.target = summary.target;
  info.ended_early = summary.ended_early;
}

namespace detail {

template <class V, class R, If<R, RunInfo> = 0>
void visit(V& v, R& info) {
  v.field("name", info.name);
  v.field("started", info.started);
  v.field("ended", info.ended);
  v.field("status", info.status);
  v.field("error", info.error);
  v.field("device", info.device);
  v.field("strategy", info.strategy);
  v.field("strategy_reason", info.strategy_reason);
  v.field("replicas", info.replicas);
  v.field("task", info.task);
  v.field("class_names", info.class_names);
  v.field("amp", info.amp);
  v.field("epochs", info.epochs);
  v.field("steps_per_epoch", info.steps_per_epoch);
  v.field("train_samples", info.train_samples);
  v.field("batch_size", info.batch_size);
  v.field("accumulation_steps", info.accumulation_steps);
  v.field("micro_batch", info.micro_batch);
  v.field("last_micro_batch", info.last_micro_batch);
  v.field("full_split", info.full_split);
  v.field("last_split", info.last_split);
  v.field("target_accuracy", info.target_accuracy);
  v.field("target_reached", info.target);
  v.field("ended_early", info.ended_early);
}

}  // namespace detail

void write_run_info(const std::filesystem::path& path, const RunInfo& info) {
  detail::JsonOut out(/*every_key=*/true);
  visit(out, info);
  write_atomically(path, out.json().dump(2) + "\n");
}

RunInfo read_run_info(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw UserError(fmt::format("{}: cannot read the run record", path.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not a run record ({})", path.string(), e.what()));
  }
  if (!j.is_object()) throw UserError(fmt::format("{}: not a run record (expected a JSON object)", path.string()));
  RunInfo info;
  try {
    detail::JsonIn fields(j, /*strict=*/true);
    visit(fields, info);
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("{}: a field has the wrong type ({})", path.string(), e.what()));
  }
  if (info.target) info.target->target = info.target_accuracy;
  return info;
}

}  // namespace gputrain::report
