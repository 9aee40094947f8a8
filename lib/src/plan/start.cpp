#include "gputrain/plan/start.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "gputrain/checkpoint/format.h"
#include "gputrain/common/error.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/device/probe.h"

namespace gputrain::plan {

namespace {

config::LoadedConfig file_config(const StartRequest& request, std::vector<ConfigError>* problems) {
  return config::load_config(request.config_files, request.overrides, problems);
}

// --config's, or with --resume ("auto" or a checkpoint) the checkpoint's with --set on top.
checkpoint::Resumption resumed_or_file(const StartRequest& request, std::vector<ConfigError>* problems) {
  std::optional<config::LoadedConfig> from_file;
  if (!request.config_files.empty()) {
    from_file = file_config(request, problems);
  } else if (request.resume.empty() || request.resume == "auto") {
    throw UserError(fmt::format("{} needs --config FILE (or --resume with a checkpoint file, whose config it restores)",
                                request.command));
  }
  if (request.resume.empty()) return {*from_file, std::nullopt};
  return checkpoint::resolve_resume(request.resume, from_file, request.overrides);
}

// Saved weights' config: --config (with --set), or the one a checkpoint file holds.
checkpoint::Resumption weights_config(const StartRequest& request, std::vector<ConfigError>* problems) {
  if (!request.config_files.empty()) return {file_config(request, problems), std::nullopt};
  // (A missing or foreign file is left to the checkpoint reader, which says what it is.)
  std::error_code unreadable;  // a symbolic link loop, say: the reader names it too
  if (std::filesystem::is_regular_file(request.weights, unreadable) &&
      checkpoint::is_weights_archive(request.weights)) {
    throw UserError(
        fmt::format("{} holds weights only, not the config they were trained with: give --config (the "
                    "run's config.yaml), or use a checkpoint file, which holds its config",
                    request.weights));
  }
  return {checkpoint::resolve_resume(request.weights, std::nullopt, request.overrides).config, std::nullopt};
}

// train without --resume: as train.resume says, given the launcher's restarts.
checkpoint::Resumption training_start(const StartRequest& request, std::vector<ConfigError>* problems) {
  if (!request.resume.empty() || request.config_files.empty()) return resumed_or_file(request, problems);
  config::LoadedConfig from_file = file_config(request, problems);
  const checkpoint::ResumeChoice choice = checkpoint::choose_resume(from_file.config.train.resume, request.restarts);
  spdlog::info("{}", choice.reason);
  if (choice.resume.empty()) return {std::move(from_file), std::nullopt};
  return checkpoint::resolve_resume(choice.resume, from_file, request.overrides);
}

// The request resolve_run takes: the devices probed once, the launcher's
// word, and the batch resolved before (by the checkpoint continued, or by
// `train --nproc`'s launcher for its workers).
RunRequest run_request(const StartRequest& request, const std::optional<checkpoint::Checkpoint>& checkpoint,
                       const device::DeviceInventory& inventory) {
  RunRequest out;
  out.purpose = request.purpose;
  out.inventory = inventory;
  out.launch = request.launch;
  out.nproc = request.nproc;
  out.meminfo = request.meminfo;
  out.kernel_cache_env = request.kernel_cache_env;
  out.weights = request.weights;
  out.run_views = request.run_views;
  out.resolved_batch = request.launcher_batch;
  out.resolved_by = "the launcher";
  if (checkpoint && checkpoint->state().batch) {
    const checkpoint::TrainingState& resumed = checkpoint->state();
    out.resolved_batch = resumed.batch;
    out.resolved_by = "the checkpoint";
    out.resumed_mid_epoch = resumed.position.batch > 0;
  }
  out.resuming = checkpoint.has_value();
  return out;
}

}  // namespace

void check_resumable(const checkpoint::Checkpoint& checkpoint, const RunPlan& run) {
  const checkpoint::Position& at = checkpoint.state().position;
  // The reader refuses negative counts; what is left to check needs the config.
  const int64_t epochs = run.loaded.config.train.epochs;
  if (at.epoch > epochs || (at.epoch == epochs && at.batch > 0)) {
    throw CheckpointError(
        fmt::format("{}: its position (epoch {}, micro-batch {}, step {}) lies beyond train.epochs "
                    "({}); raise train.epochs with --set train.epochs=N to train on from it",
                    checkpoint.name(), at.epoch, at.batch, at.step, epochs));
  }
  if (at.step < at.epoch) {  // every epoch takes one optimizer step at least
    throw CheckpointError(
        fmt::format("{}: its position (epoch {}, step {}) is impossible: fewer steps than epochs "
                    "done. The file was not written by gputrain's training",
                    checkpoint.name(), at.epoch, at.step));
  }
  if (!run.train_set) return;  // a launcher that reads no data: its workers check
  const int64_t micro_batches = data::batch_count(run.train_loader, run.train_set->info().samples);
  if (at.batch > micro_batches) {
    throw CheckpointError(fmt::format("{}: stopped {} micro-batches into an epoch, but an epoch has {} here",
                                      checkpoint.name(), at.batch, micro_batches));
  }
}

checkpoint::Resumption starting_point(const StartRequest& request, std::vector<ConfigError>* problems) {
  switch (request.purpose) {
    case Purpose::kTrain:
      return training_start(request, problems);
    case Purpose::kEvaluate:
    case Purpose::kPredict:
    case Purpose::kExport:
      return weights_config(request, problems);
    case Purpose::kBench:
    case Purpose::kDescribe:
      break;
  }
  return resumed_or_file(request, problems);
}

Start start_run(const StartRequest& request) {
  checkpoint::Resumption from = starting_point(request);
  Start start;
  // export and describe build the network on the CPU: no device is asked for.
  if (request.purpose != Purpose::kExport && request.purpose != Purpose::kDescribe) {
    start.inventory = device::probe_devices(request.cuda_visible_devices);
  }
  const RunRequest run_req = run_request(request, from.checkpoint, start.inventory);
  start.checkpoint = std::move(from.checkpoint);
  start.run = resolve_run(std::move(from.config), run_req);
  if (start.checkpoint) check_resumable(*start.checkpoint, start.run);
  return start;
}

CollectedStart collect_start(const StartRequest& request) {
  CollectedStart start;
  std::vector<std::string>& problems = start.run.problems;
  std::vector<ConfigError> config_problems;
  std::optional<checkpoint::Resumption> from;
  const bool read = config::collect_refusal(problems, [&] { from = starting_point(request, &config_problems); });
  // The config's own problems first, each at its key's place.
  std::vector<std::string> listed;
  for (const ConfigError& problem : config_problems) listed.emplace_back(problem.what());
  problems.insert(problems.begin(), listed.begin(), listed.end());
  if (!read) return start;
  start.configured = true;
  start.config_from = request.config_files.empty() ? from->checkpoint->name()
                                                   : fmt::format("{}", fmt::join(request.config_files, " + "));
  start.inventory = device::probe_devices(request.cuda_visible_devices);
  const RunRequest run_req = run_request(request, from->checkpoint, start.inventory);
  CollectedRun run = collect_run(std::move(from->config), run_req);
  // A key the config's rules refused can be refused again by a part resolved
  // with the config's fallback (train.amp: fp16 on device: auto's CPU): said once.
  for (std::string& problem : run.problems) {
    if (std::find(listed.begin(), listed.end(), problem) == listed.end()) problems.push_back(std::move(problem));
  }
  if (from->checkpoint && run.reached >= Reached::kBatch) {
    config::collect_refusal(problems, [&] { check_resumable(*from->checkpoint, run.plan); });
  }
  run.problems = std::move(problems);
  start.run = std::move(run);
  return start;
}

}  // namespace gputrain::plan
