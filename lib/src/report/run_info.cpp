#include "gputrain/report/run_info.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/report/run_dir.h"

namespace gputrain::report {

namespace {

std::string local_time_now() { return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(std::time(nullptr))); }

nlohmann::ordered_json splits_json(const std::vector<parallel::ReplicaSplit>& splits) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& s : splits)
    out.push_back({{"replica", s.replica}, {"device", s.device}, {"begin", s.begin}, {"end", s.end}});
  return out;
}

std::vector<parallel::ReplicaSplit> splits_from(const nlohmann::json& j) {
  std::vector<parallel::ReplicaSplit> out;
  if (!j.is_array()) return out;
  for (const auto& s : j) {
    out.push_back({s.value("replica", int64_t{0}), s.value("device", std::string()), s.value("begin", int64_t{0}),
                   s.value("end", int64_t{0})});
  }
  return out;
}

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

RunSettings run_settings(const config::ExperimentConfig& config) {
  return {config.name,
          config.train.amp,
          config.train.epochs,
          config.data.batch_size.value(),
          config.train.accumulation_steps,
          config.train.target_accuracy};
}

RunInfo describe_run(const RunSettings& settings, const train::TrainLayout& layout) {
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
  info.task = !layout.labeled ? "unlabeled" : layout.classification ? "classification" : "regression";
  if (layout.classification) info.class_names = layout.class_names;
  info.amp = settings.amp;
  info.epochs = settings.epochs;
  info.steps_per_epoch = layout.steps_per_epoch;
  info.train_samples = layout.train_samples;
  info.batch_size = settings.batch_size;
  info.accumulation_steps = settings.accumulation_steps;
  info.target_accuracy = settings.target_accuracy;
  info.micro_batch = layout.micro_batch;
  info.last_micro_batch = layout.last_micro_batch;
  if (layout.strategy.kind != parallel::StrategyKind::kSingle) {
    info.full_split = parallel::split_batch(layout.micro_batch, info.replicas);
    info.last_split = parallel::split_batch(layout.last_micro_batch, info.replicas);
  }
  return info;
}

void end_run(RunInfo& info, const std::string& status, const std::string& error) {
  info.status = status;
  info.error = error;
  info.ended = local_time_now();
}

void record_outcome(RunInfo& info, const train::TrainSummary& summary) {
  info.target = summary.target;
  info.ended_early = summary.ended_early;
}

namespace {

nlohmann::ordered_json target_json(const std::optional<train::TargetReached>& target) {
  if (!target) return nullptr;
  return {{"accuracy", target->accuracy},
          {"epoch", target->epoch},
          {"step", target->step},
          {"time_to_target_s", target->train_s},
          {"time_to_target_wall_s", target->wall_s}};
}

std::optional<train::TargetReached> target_from(const nlohmann::json& j, double target_accuracy) {
  if (!j.is_object()) return std::nullopt;
  train::TargetReached t;
  t.target = target_accuracy;
  t.accuracy = j.value("accuracy", 0.0);
  t.epoch = j.value("epoch", int64_t{0});
  t.step = j.value("step", int64_t{0});
  t.train_s = j.value("time_to_target_s", 0.0);
  t.wall_s = j.value("time_to_target_wall_s", 0.0);
  return t;
}

}  // namespace

void write_run_info(const std::filesystem::path& path, const RunInfo& info) {
  const nlohmann::ordered_json j{{"name", info.name},
                                 {"started", info.started},
                                 {"ended", info.ended},
                                 {"status", info.status},
                                 {"error", info.error},
                                 {"device", info.device},
                                 {"strategy", info.strategy},
                                 {"strategy_reason", info.strategy_reason},
                                 {"replicas", info.replicas},
                                 {"task", info.task},
                                 {"class_names", info.class_names},
                                 {"amp", config::word(info.amp)},
                                 {"epochs", info.epochs},
                                 {"steps_per_epoch", info.steps_per_epoch},
                                 {"train_samples", info.train_samples},
                                 {"batch_size", info.batch_size},
                                 {"accumulation_steps", info.accumulation_steps},
                                 {"micro_batch", info.micro_batch},
                                 {"last_micro_batch", info.last_micro_batch},
                                 {"full_split", splits_json(info.full_split)},
                                 {"last_split", splits_json(info.last_split)},
                                 {"target_accuracy", info.target_accuracy},
                                 {"target_reached", target_json(info.target)},
                                 {"ended_early", info.ended_early}};
  write_atomically(path, j.dump(2) + "\n");
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
    info.name = j.value("name", info.name);
    info.started = j.value("started", info.started);
    info.ended = j.value("ended", info.ended);
    info.status = j.value("status", info.status);
    info.error = j.value("error", info.error);
    info.device = j.value("device", info.device);
    info.strategy = j.value("strategy", info.strategy);
    info.strategy_reason = j.value("strategy_reason", info.strategy_reason);
    info.replicas = j.value("replicas", info.replicas);
    info.task = j.value("task", info.task);
    info.class_names = j.value("class_names", info.class_names);
    info.amp = config::kAmpModes.parse(j.value("amp", "off")).value_or(config::AmpMode::kOff);
    info.epochs = j.value("epochs", info.epochs);
    info.steps_per_epoch = j.value("steps_per_epoch", info.steps_per_epoch);
    info.train_samples = j.value("train_samples", info.train_samples);
    info.batch_size = j.value("batch_size", info.batch_size);
    info.accumulation_steps = j.value("accumulation_steps", info.accumulation_steps);
    info.micro_batch = j.value("micro_batch", info.micro_batch);
    info.last_micro_batch = j.value("last_micro_batch", info.last_micro_batch);
    info.full_split = splits_from(j.value("full_split", nlohmann::json()));
    info.last_split = splits_from(j.value("last_split", nlohmann::json()));
    info.target_accuracy = j.value("target_accuracy", info.target_accuracy);
    info.target = target_from(j.value("target_reached", nlohmann::json()), info.target_accuracy);
    info.ended_early = j.value("ended_early", info.ended_early);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: a field has the wrong type ({})", path.string(), e.what()));
  }
  return info;
}

}  // namespace gputrain::report
