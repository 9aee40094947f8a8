#include "gputrain/train/profile.h"

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"

namespace gputrain::train {

namespace fs = std::filesystem;
namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

namespace {

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> out{ActivityType::CPU};
  if (cuda) out.insert(ActivityType::CUDA);
  return out;
}

// Each operator's calls, total and self time, over the CPU events of every
// thread: self is its time less that of the events nested directly in it
// (as PyTorch's key_averages() counts it).
std::map<std::string, OperatorTime> times(const std::vector<profiler::KinetoEvent>& events) {
  std::map<uint64_t, std::vector<const profiler::KinetoEvent*>> by_thread;
  for (const profiler::KinetoEvent& e : events) {
    if (e.deviceType() == c10::DeviceType::CPU && !e.isAsync()) by_thread[e.startThreadId()].push_back(&e);
  }
  std::map<std::string, OperatorTime> by_name;
  for (auto& [thread, list] : by_thread) {
    // Parents before their children: by start, the longer first.
    std::sort(list.begin(), list.end(), [](const profiler::KinetoEvent* a, const profiler::KinetoEvent* b) {
      return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->endNs() > b->endNs();
    });
    std::vector<double> self_ms(list.size());
    std::vector<std::size_t> open;  // the events that contain the current one, innermost last
    for (std::size_t i = 0; i < list.size(); ++i) {
      while (!open.empty() && list[open.back()]->endNs() <= list[i]->startNs()) open.pop_back();
      const double ms = static_cast<double>(list[i]->durationNs()) / 1e6;
      self_ms[i] = ms;
      if (!open.empty()) self_ms[open.back()] -= ms;
      open.push_back(i);
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string name = list[i]->name();
      // The per-step marks (ProfilerStep#N) hold every operator of their step: not operators themselves.
      if (name.rfind(kStepMark, 0) == 0) continue;
      OperatorTime& op = by_name[name];
      op.name = name;
      ++op.calls;
      op.total_ms += static_cast<double>(list[i]->durationNs()) / 1e6;
      op.self_ms += std::max(0.0, self_ms[i]);
    }
  }
  return by_name;
}

}  // namespace

StepProfiler::StepProfiler(bool cuda) : cuda_(cuda) {}

StepProfiler::~StepProfiler() {
  if (running_) profiler::disableProfiler();
}

void StepProfiler::start() {
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/false, /*profile_memory=*/false);
  profiler::prepareProfiler(config, activities(cuda_));
  profiler::enableProfiler(config, activities(cuda_));
  running_ = true;
}

ProfileSummary StepProfiler::stop(const fs::path& trace, int64_t steps, std::size_t top) {
  GPUTRAIN_CHECK(running_, "StepProfiler::stop without start");
  running_ = false;
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  ProfileSummary summary;
  summary.trace = trace;
  summary.steps = steps;
  for (auto& [name, op] : times(result->events())) {
    summary.self_ms += op.self_ms;
    summary.top.push_back(std::move(op));
  }
  std::sort(summary.top.begin(), summary.top.end(),
            [](const OperatorTime& a, const OperatorTime& b) { return a.self_ms > b.self_ms; });
  if (summary.top.size() > top) summary.top.resize(top);
  // Kineto writes the file itself; to a temporary name first, so that a trace is whole or absent.
  const fs::path partial = fs::path(trace.string() + ".partial");
  result->save(partial.string());
  std::error_code error;
  fs::rename(partial, trace, error);
  if (error) throw UserError(fmt::format("{}: cannot write the profile's trace: {}", trace.string(), error.message()));
  return summary;
}

StepMark::StepMark(int64_t step) : guard_(std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE)) {
  if (guard_->isActive()) guard_->before(fmt::format("{}{}", kStepMark, step));
}

StepMark::~StepMark() = default;

ProfileWindow::ProfileWindow(int64_t epoch, int64_t steps, fs::path dir, bool cuda)
    : epoch_(epoch), steps_(steps), dir_(std::move(dir)), profiler_(cuda) {}

std::unique_ptr<StepMark> ProfileWindow::before_step(int64_t epoch, int64_t step) {
  if (done_ || epoch != epoch_) return nullptr;
  if (!profiler_.running()) {
    spdlog::info("profile: recording {} steps of epoch {} (train.profile)", steps_, epoch_);
    profiler_.start();
  }
  return std::make_unique<StepMark>(step);
}

void ProfileWindow::after_step() {
  if (profiler_.running() && ++recorded_ == steps_) finish();
}

void ProfileWindow::end_epoch() {
  if (profiler_.running()) finish();
}

void ProfileWindow::finish() {
  done_ = true;
  const ProfileSummary summary = profiler_.stop(dir_ / "profile_trace.json", recorded_);
  write_profile_summary(dir_ / "profile.json", summary);
  spdlog::info("profile: {} steps of epoch {} in {} (open it in ui.perfetto.dev); the operators by self time:\n{}",
               recorded_, epoch_, summary.trace.string(), top_operators_table(summary));
}

std::string top_operators_table(const ProfileSummary& summary) {
  std::size_t width = 8;
  for (const OperatorTime& op : summary.top) width = std::max(width, op.name.size());
  std::string out = fmt::format("{:<{}}  {:>7}  {:>10}  {:>6}  {:>10}\n", "operator", width, "calls", "self ms",
                                "self %", "total ms");
  for (const OperatorTime& op : summary.top) {
    out += fmt::format("{:<{}}  {:>7}  {:>10.3f}  {:>5.1f}%  {:>10.3f}\n", op.name, width, op.calls, op.self_ms,
                       summary.self_ms > 0 ? 100 * op.self_ms / summary.self_ms : 0.0, op.total_ms);
  }
  return out;
}

void write_profile_summary(const fs::path& path, const ProfileSummary& summary) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OperatorTime& op : summary.top) {
    ops.push_back({{"name", op.name}, {"calls", op.calls}, {"self_ms", op.self_ms}, {"total_ms", op.total_ms}});
  }
  const nlohmann::json j{{"trace", summary.trace.filename().string()},
                         {"steps", summary.steps},
                         {"self_ms", summary.self_ms},
                         {"operators", ops}};
  write_atomically(path, j.dump(2) + "\n");
}

std::optional<ProfileSummary> read_profile_summary(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  ProfileSummary summary;
  summary.trace = path.parent_path() / j.value("trace", "");
  summary.steps = j.value("steps", int64_t{0});
  summary.self_ms = j.value("self_ms", 0.0);
  for (const nlohmann::json& op : j.value("operators", nlohmann::json::array())) {
    summary.top.push_back(
        {op.value("name", ""), op.value("calls", int64_t{0}), op.value("self_ms", 0.0), op.value("total_ms", 0.0)});
  }
  return summary;
}

}  // namespace gputrain::train
