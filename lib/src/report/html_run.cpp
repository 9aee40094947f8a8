#include "html_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "gputrain/common/error.h"
#include "gputrain/report/run_dir.h"

namespace gputrain::report::detail {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Run load_run(const fs::path& dir) {
  const RunPaths paths = run_paths(dir);
  if (!fs::is_regular_file(paths.metrics)) {
    throw UserError(
        fmt::format("{}: no metrics.jsonl here; give the directory a `gputrain train` run wrote "
                    "(<output.dir>/<name>/)",
                    dir.string()));
  }
  Run run;
  run.dir = dir;
  run.name = fs::absolute(dir).lexically_normal().filename().string();
  if (run.name.empty()) run.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  run.metrics = detail::read_metrics_log(paths.metrics);
  if (fs::exists(paths.run_info)) {
    try {
      run.info = read_run_info(paths.run_info);
      if (!run.info->name.empty()) run.name = run.info->name;
    } catch (const UserError& e) {
      run.notes.push_back(std::string(e.what()) + ". Status, strategy and batch splits are unknown.");
    }
  } else {
    run.notes.push_back("There is no run.json, so the run's status, strategy and batch splits are unknown.");
  }
  run.config_text = read_text(paths.config);
  if (!run.config_text) run.notes.push_back("There is no config.yaml in the run directory.");
  if (const auto text = read_text(paths.device_report)) {
    Json device = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (device.is_object()) {
      run.device = device;
    } else {
      run.notes.push_back("device.json is not a JSON object; the device report is left out.");
    }
  } else {
    run.notes.push_back("There is no device.json, so the device report is missing.");
  }

  const auto& epochs = run.metrics.epochs;
  if (run.info && run.info->task) {
    run.labeled = run.info->task != Task::kUnlabeled;
    run.classification = run.info->task == Task::kClassification;
  } else {  // no run.json: guess from what was logged (unlabeled runs log no intervals and no tests)
    const auto& steps = run.metrics.steps;
    run.labeled =
        !steps.empty() || std::any_of(epochs.begin(), epochs.end(), [](const auto& e) { return e.second.test; });
    run.classification =
        std::any_of(steps.begin(), steps.end(), [](const MetricsRecord& s) { return s.accuracy.value_or(0) > 0; }) ||
        std::any_of(epochs.begin(), epochs.end(),
                    [](const auto& e) { return e.second.train && e.second.train->accuracy.value_or(0) > 0; });
  }
  run.fp16 =
      run.info ? run.info->amp == config::AmpMode::kFp16 : std::any_of(epochs.begin(), epochs.end(), [](const auto& e) {
        return e.second.train && e.second.train->loss_scale.value_or(1) != 1;
      });
  return run;
}

Status run_status(const Run& run) {
  if (!run.info) return {"status unknown", "unknown"};
  switch (run.info->status) {
    case RunStatus::kFinished:
      return {"finished", "ok"};
    case RunStatus::kFailed:
      return {"failed", "bad"};
    case RunStatus::kInterrupted:
      return {"interrupted", "warn"};
    case RunStatus::kRunning:
      return {"did not finish", "warn"};
  }
  config::unhandled(run.info->status);
}

std::vector<std::string> partial_run_notes(const Run& run) {
  std::vector<std::string> notes;
  const auto& m = run.metrics;
  if (run.info && run.info->status == RunStatus::kFailed) notes.push_back("The run failed: " + run.info->error);
  if (run.info && run.info->status == RunStatus::kInterrupted)
    notes.push_back("The run was stopped: " + run.info->error);
  if (run.info && run.info->status == RunStatus::kRunning) {
    notes.push_back(
        "run.json records no end: the process was killed or crashed, or it is still running. "
        "The report shows what it logged.");
  }
  if (m.steps.empty() && m.epochs.empty()) {
    notes.push_back("metrics.jsonl holds no records: the run stopped before its first log interval.");
    return notes;
  }
  int64_t done = 0;
  for (const auto& [epoch, e] : m.epochs) {
    if (e.train) done = std::max(done, epoch);
  }
  if (run.info && run.info->epochs > 0 && done < run.info->epochs) {
    notes.push_back(fmt::format("{} of {} epochs completed.", done, run.info->epochs));
  }
  if (!m.epochs.empty()) {
    const EpochRecord& last = m.epochs.rbegin()->second;
    if (run.labeled && last.train && !last.test) {
      notes.push_back(fmt::format("Epoch {} has no test record: the run stopped during its test pass.", last.epoch));
    }
  }
  const double last_epoch_step = m.epochs.empty() ? 0.0 : m.epochs.rbegin()->second.step().value_or(0.0);
  const auto later = std::count_if(m.steps.begin(), m.steps.end(), [&](const MetricsRecord& s) {
    return s.epoch > done && as_figure(s.step).value_or(0) > last_epoch_step;
  });
  if (later > 0) {
    notes.push_back(
        fmt::format("{} log interval(s) of epoch {} were recorded before the run stopped; they end the "
                    "step curves.",
                    later, done + 1));
  }
  return notes;
}

}  // namespace gputrain::report::detail
