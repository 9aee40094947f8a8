#pragma once
// `gputrain sweep`: one experiment run several times (over seeds, and over
// the values of keys), and a table of what each run reached with the mean
// and standard deviation, as the speed-record papers report them.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gputrain::report {

// Runs one sweep makes at most: seeds x --vary combinations. A sweep runs
// them one after another, so more is days of training, most likely a typo.
inline constexpr std::size_t kMaxSweepRuns = 1000;

// --seeds: "0..4" (both ends included) or "0,3,7". UserError otherwise.
std::vector<uint64_t> parse_seeds(const std::string& text);

struct SweepPoint {
  int64_t index = 0;  // 1-based
  uint64_t seed = 0;
  std::vector<std::string> settings;  // KEY=VALUE, one per --vary
};

// Every combination of the seeds and the --vary KEY=V1,V2,... values (each
// value a YAML scalar: commas separate them), the seeds varying fastest.
// UserError for a --vary without KEY= or without values, a key varied twice,
// `seed` or `name` (the sweep sets them), or more than kMaxSweepRuns runs.
std::vector<SweepPoint> sweep_points(const std::vector<uint64_t>& seeds, const std::vector<std::string>& vary);

struct SweepRun {
  SweepPoint point;
  int exit_code = 0;
  nlohmann::json result;  // the run's result line (gputrain train's JSON); null when it printed none
  double wall_s = 0;      // the run's process from start to exit (ChildOutput::wall_s)
};

// A sample's mean and standard deviation (n - 1 in the denominator; 0 for one value).
struct Spread {
  std::size_t n = 0;
  double mean = 0;
  double std = 0;
};
std::optional<Spread> spread(const std::vector<double>& values);

// What a stop signal (`signal`: "SIGTERM", ...) did to a sweep of `total`
// runs: it stopped `run` (its result line and the command that runs it
// afresh; started false: it stopped the sweep before that run began), and
// how to continue: `train --resume` from the run's checkpoint where it wrote one.
std::string sweep_stop_message(const std::string& signal, const SweepRun& run, std::size_t total, bool started,
                               const std::string& rerun_command);

// One row per run (seed, varied keys, test accuracy, time to target, wall
// time, how it ended), then the mean ± standard deviation of each column
// over the runs that have it, and how many reached the target.
std::string format_sweep(const std::vector<SweepRun>& runs);
// The same as one object: each run with its result line and its process's
// wall time (`process_wall_s`, the end-to-end time of a run), then the mean
// and standard deviation of each figure.
nlohmann::ordered_json sweep_json(const std::vector<SweepRun>& runs);

}  // namespace gputrain::report
