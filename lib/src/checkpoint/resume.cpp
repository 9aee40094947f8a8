#include "gputrain/checkpoint/resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/config/schema.h"

namespace gputrain::checkpoint {

namespace {

// Where `key` of `config` was written, for messages.
std::string origin(const config::LoadedConfig& config, const std::string& key) {
  const std::string at = config.sources.at(key).str();
  return at.empty() ? "the defaults" : at;
}

}  // namespace

std::vector<std::string> incompatible_keys(const config::ExperimentConfig& stored,
                                           const config::ExperimentConfig& requested, const Position& at) {
  const auto before = config::flatten_config(stored);
  const auto after = config::flatten_config(requested);
  std::vector<std::string> keys;
  for (const auto& [key, value] : before) {
    if (config::is_fixed_on_resume(key, at.batch > 0) && after.at(key) != value) keys.push_back(key);
  }
  return keys;
}

Resumption resolve_resume(const std::string& resume, const std::optional<config::LoadedConfig>& file_config,
                          const std::vector<std::string>& overrides) {
  std::optional<Checkpoint> checkpoint;
  if (resume == "auto") {
    if (!file_config) throw UserError("--resume auto needs --config: it resumes the run that config names");
    const auto dir = config::checkpoint_directory(file_config->config);
    checkpoint = newest_valid(dir);
    if (!checkpoint) {
      spdlog::info("--resume auto: no checkpoint in {}, so training starts from scratch", dir.string());
      return {*file_config, std::nullopt};
    }
  } else {
    checkpoint = Checkpoint::read(resume);
  }
  const std::string origin_name = checkpoint->name() + " (its config)";
  const config::LoadedConfig stored = config::load_config_text(checkpoint->state().config, origin_name);
  config::LoadedConfig resumed = config::load_config_text(checkpoint->state().config, origin_name, overrides);
  const config::LoadedConfig& requested = file_config ? *file_config : resumed;
  const Position& at = checkpoint->state().position;

  const auto bad = incompatible_keys(stored.config, requested.config, at);
  if (!bad.empty()) {
    const auto before = config::flatten_config(stored.config);
    const auto after = config::flatten_config(requested.config);
    std::vector<std::string> lines;
    for (const auto& key : bad) {
      lines.push_back(fmt::format("{} is {} in the checkpoint but {} in {}", key, before.at(key), after.at(key),
                                  origin(requested, key)));
    }
    throw CheckpointError(fmt::format(
        "{}: cannot resume with another model, data set{}: {}. Keep the checkpoint's values, or start a new run "
        "(another name or output.dir) without --resume",
        checkpoint->name(), at.batch > 0 ? ", seed, optimizer or (mid-epoch) batch order" : ", seed or optimizer",
        fmt::join(lines, "; ")));
  }
  if (file_config) {
    const auto before = config::flatten_config(resumed.config);
    const auto after = config::flatten_config(file_config->config);
    std::vector<std::string> ignored;
    for (const auto& [key, value] : before) {
      if (after.at(key) != value)
        ignored.push_back(fmt::format("{} ({} there, {} in the checkpoint)", key, after.at(key), value));
    }
    if (!ignored.empty()) {
      spdlog::warn(
          "--resume continues with the checkpoint's config, so these values of the --config file are "
          "ignored: {}. Change a key with --set KEY=VALUE",
          fmt::join(ignored, ", "));
    }
  }
  return {std::move(resumed), std::move(checkpoint)};
}

ResumeChoice choose_resume(const config::ResumeFrom& setting, const Restarts& restarts) {
  using Kind = config::ResumeFrom::Kind;
  if (setting.kind == Kind::kNever) return {"", "train.resume: never, so training starts afresh"};
  if (setting.kind == Kind::kCheckpoint) {
    return {setting.checkpoint, fmt::format("train.resume: continuing from {}", setting.checkpoint)};
  }
  if (restarts.elastic > 0) {
    return {"auto", fmt::format("train.resume: auto, and this is restart {} of an elastic job "
                                "(TORCHELASTIC_RESTART_COUNT={}): continuing from the newest intact checkpoint",
                                restarts.elastic, restarts.elastic)};
  }
  if (restarts.slurm > 0) {
    return {"auto", fmt::format("train.resume: auto, and this Slurm job was requeued (SLURM_RESTART_COUNT={}): "
                                "continuing from the newest intact checkpoint",
                                restarts.slurm)};
  }
  return {"",
          "train.resume: auto, and this is a first start (TORCHELASTIC_RESTART_COUNT and SLURM_RESTART_COUNT "
          "are unset or 0), so training starts afresh; --resume auto continues an earlier run"};
}

}  // namespace gputrain::checkpoint
