#pragma once
// train.profile (and `gputrain bench --profile`): LibTorch's profiler (Kineto)
// over a few optimizer steps, written as a Chrome/Perfetto trace, with the
// operators that took the most time themselves (their children's excluded).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace at {
struct RecordFunction;
}  // namespace at

namespace gputrain::train {

// The name each recorded step's span has in the trace, with its number: ProfilerStep#3 (PyTorch's).
inline constexpr const char* kStepMark = "ProfilerStep#";

struct OperatorTime {
  std::string name;  // aten::addmm, ...
  int64_t calls = 0;
  double self_ms = 0;   // its own time: its children's (the ops it called) left out
  double total_ms = 0;  // with its children's
};

struct ProfileSummary {
  std::filesystem::path trace;    // the Chrome/Perfetto trace
  int64_t steps = 0;              // optimizer steps recorded
  double self_ms = 0;             // every operator's self time, summed
  std::vector<OperatorTime> top;  // by self time, most first
};

// Records every LibTorch operator (and, with `cuda`, the CUDA kernels and
// copies) run on any thread between start() and stop().
class StepProfiler {
 public:
  explicit StepProfiler(bool cuda);
  ~StepProfiler();  // stops a recording still running, keeping nothing
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  void start();
  bool running() const { return running_; }
  // Ends the recording: the trace into `trace`, the `top` operators by self time.
  ProfileSummary stop(const std::filesystem::path& trace, int64_t steps, std::size_t top = 15);

 private:
  bool cuda_;
  bool running_ = false;
};

// One optimizer step's span in the trace, from construction to destruction.
class StepMark {
 public:
  explicit StepMark(int64_t step);
  ~StepMark();
  StepMark(const StepMark&) = delete;
  StepMark& operator=(const StepMark&) = delete;

 private:
  std::unique_ptr<at::RecordFunction> guard_;
};

// train.profile in the training loop: recording starts at `epoch`'s first
// optimizer step and stops after `steps` of them (or at the epoch's end);
// then the trace (profile_trace.json) and profile.json go into `dir` and the
// table into the log.
class ProfileWindow {
 public:
  ProfileWindow(int64_t epoch, int64_t steps, std::filesystem::path dir, bool cuda);
  // Around each optimizer step: the mark of a step recorded, else null.
  std::unique_ptr<StepMark> before_step(int64_t epoch, int64_t step);
  void after_step();
  void end_epoch();

 private:
  void finish();
  int64_t epoch_;
  int64_t steps_;
  std::filesystem::path dir_;
  StepProfiler profiler_;
  int64_t recorded_ = 0;
  bool done_ = false;
};

// The summary as the log and report.html show it: one operator a line.
std::string top_operators_table(const ProfileSummary& summary);

// profile.json in the run directory, for report.html; read_profile_summary:
// none when the file is not there.
void write_profile_summary(const std::filesystem::path& path, const ProfileSummary& summary);
std::optional<ProfileSummary> read_profile_summary(const std::filesystem::path& path);

}  // namespace gputrain::train
