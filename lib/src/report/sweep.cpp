#include "gputrain/report/sweep.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <regex>
#include <set>
#include <string_view>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::report {

namespace {

uint64_t seed_number(const std::string& text, const std::string& whole) {
  static const std::regex kNumber("[0-9]{1,18}");
  if (!std::regex_match(text, kNumber)) {
    throw UserError(fmt::format("--seeds {}: '{}' is not a seed; write a range 0..4 or a list 0,3,7", whole, text));
  }
  return std::stoull(text);
}

// A figure of the run's result line, when it has one.
std::optional<double> figure(const nlohmann::json& result, const char* key) {
  if (!result.is_object() || !result.contains(key) || !result[key].is_number()) return std::nullopt;
  return result[key].get<double>();
}

std::string status(const SweepRun& run) {
  if (run.exit_code == static_cast<int>(ExitCode::kPreempted)) return "preempted (exit 75)";
  if (run.exit_code == static_cast<int>(ExitCode::kInterrupted)) return "stopped (exit 130)";
  if (run.exit_code != 0) return fmt::format("failed (exit {})", run.exit_code);
  if (run.result.is_object() && run.result.contains("ended_early")) return "ended early";
  return "finished";
}

std::string cell(std::optional<double> value, double scale, const char* format) {
  return value ? fmt::format(fmt::runtime(format), *value * scale) : std::string("–");
}

std::vector<double> column(const std::vector<SweepRun>& runs, const char* key) {
  std::vector<double> values;
  for (const SweepRun& run : runs) {
    if (auto v = figure(run.result, key)) values.push_back(*v);
  }
  return values;
}

std::string spread_text(const std::vector<double>& values, double scale, const char* unit) {
  const auto s = spread(values);
  if (!s) return "–";
  return fmt::format("{:.2f} ± {:.2f}{} (n={})", s->mean * scale, s->std * scale, unit, s->n);
}

}  // namespace

std::vector<uint64_t> parse_seeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  if (const auto dots = text.find(".."); dots != std::string::npos) {
    const uint64_t first = seed_number(text.substr(0, dots), text);
    const uint64_t last = seed_number(text.substr(dots + 2), text);
    if (last < first || last - first >= kMaxSweepRuns) {
      throw UserError(
          fmt::format("--seeds {}: a range runs from the smaller seed to the larger, 1000 runs at most", text));
    }
    for (uint64_t s = first; s <= last; ++s) seeds.push_back(s);
    return seeds;
  }
  for (const std::string& part : split(text, ',')) seeds.push_back(seed_number(std::string(trim(part)), text));
  return seeds;
}

std::vector<SweepPoint> sweep_points(const std::vector<uint64_t>& seeds, const std::vector<std::string>& vary) {
  if (seeds.size() > kMaxSweepRuns) {
    throw UserError(
        fmt::format("--seeds: {} seeds, more than the {} runs a sweep makes at most", seeds.size(), kMaxSweepRuns));
  }
  std::vector<std::vector<std::string>> combos{{}};
  std::set<std::string> keys;
  for (const std::string& entry : vary) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == entry.size()) {
      throw UserError(fmt::format("--vary {}: write KEY=V1,V2,... (e.g. --vary optim.lr=0.05,0.1)", entry));
    }
    const std::string key(trim(std::string_view(entry).substr(0, equals)));
    // The sweep sets these itself for every run, over what --vary would give.
    if (key == "seed" || key == "name") {
      throw UserError(fmt::format("--vary {}: the sweep sets {} for each run{}", entry, key,
                                  key == "seed" ? "; give the seeds with --seeds" : " (<name>-sweep-<N>)"));
    }
    if (!keys.insert(key).second) {
      throw UserError(fmt::format("--vary {}: {} is varied twice; give all its values in one --vary {}=V1,V2,...",
                                  entry, key, key));
    }
    const std::vector<std::string> values = split(entry.substr(equals + 1), ',');
    if (combos.size() * values.size() * seeds.size() > kMaxSweepRuns) {
      throw UserError(fmt::format(
          "--vary {}: the sweep would make more than {} runs ({} value combinations x {}); vary fewer values or "
          "split the sweep",
          entry, kMaxSweepRuns, combos.size() * values.size(), count_of(static_cast<int64_t>(seeds.size()), "seed")));
    }
    std::vector<std::vector<std::string>> next;
    for (const auto& combo : combos) {
      for (const std::string& value : values) {
        std::vector<std::string> extended = combo;
        extended.push_back(fmt::format("{}={}", key, trim(value)));
        next.push_back(extended);
      }
    }
    combos = std::move(next);
  }
  std::vector<SweepPoint> points;
  for (const auto& combo : combos) {
    for (const uint64_t seed : seeds) {
      points.push_back({static_cast<int64_t>(points.size()) + 1, seed, combo});
    }
  }
  return points;
}

std::optional<Spread> spread(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  Spread s;
  s.n = values.size();
  for (const double v : values) s.mean += v;
  s.mean /= static_cast<double>(s.n);
  if (s.n > 1) {
    double squares = 0;
    for (const double v : values) squares += (v - s.mean) * (v - s.mean);
    s.std = std::sqrt(squares / static_cast<double>(s.n - 1));
  }
  return s;
}

std::string sweep_stop_message(const std::string& signal, const SweepRun& run, std::size_t total, bool started,
                               const std::string& rerun_command) {
  const auto index = static_cast<std::size_t>(run.point.index);
  if (!started) {
    return fmt::format("{} stopped the sweep before run {} of {} (seed {}) started; runs {} to {} did not run", signal,
                       index, total, run.point.seed, index, total);
  }
  std::string out = fmt::format("{} stopped sweep run {} of {} (seed {})", signal, index, total, run.point.seed);
  const nlohmann::json& result = run.result;
  if (result.is_object() && result.contains("checkpoint") && result["checkpoint"].is_string() &&
      !result["checkpoint"].get<std::string>().empty()) {
    const std::string checkpoint = result["checkpoint"].get<std::string>();
    out += fmt::format("; its checkpoint is {}: continue that run with gputrain train --resume {}", checkpoint,
                       checkpoint);
  } else {
    out += fmt::format("; it wrote no checkpoint: run it again with {}", rerun_command);
  }
  if (index + 1 == total) out += fmt::format("; run {} did not run", total);
  if (index + 1 < total) out += fmt::format("; runs {} to {} did not run", index + 1, total);
  return out;
}

std::string format_sweep(const std::vector<SweepRun>& runs) {
  std::string out = fmt::format("{:>4}  {:>6}  {:<28}  {:>10}  {:>16}  {:>9}  {}\n", "run", "seed", "varied",
                                "test acc %", "time to target s", "elapsed s", "status");
  for (const SweepRun& run : runs) {
    const std::string varied = run.point.settings.empty() ? "–" : fmt::format("{}", fmt::join(run.point.settings, " "));
    out += fmt::format("{:>4}  {:>6}  {:<28}  {:>10}  {:>16}  {:>9}  {}\n", run.point.index, run.point.seed, varied,
                       cell(figure(run.result, "test_accuracy"), 100, "{:.2f}"),
                       cell(figure(run.result, "time_to_target_s"), 1, "{:.2f}"),
                       cell(figure(run.result, "elapsed_s"), 1, "{:.1f}"), status(run));
  }
  out += fmt::format("test accuracy: {}\n", spread_text(column(runs, "test_accuracy"), 100, "%"));
  out += fmt::format("elapsed: {}\n", spread_text(column(runs, "elapsed_s"), 1, " s"));
  std::size_t with_target = 0;
  for (const SweepRun& run : runs) with_target += run.result.is_object() && run.result.contains("target_accuracy");
  if (with_target > 0) {
    const std::vector<double> times = column(runs, "time_to_target_s");
    out += fmt::format("target reached in {} of {} runs; time to target: {}\n", times.size(), runs.size(),
                       spread_text(times, 1, " s"));
  }
  return out;
}

nlohmann::ordered_json sweep_json(const std::vector<SweepRun>& runs) {
  nlohmann::ordered_json out;
  out["runs"] = nlohmann::ordered_json::array();
  for (const SweepRun& run : runs) {
    out["runs"].push_back({{"run", run.point.index},
                           {"seed", run.point.seed},
                           {"varied", run.point.settings},
                           {"exit_code", run.exit_code},
                           {"process_wall_s", run.wall_s},
                           {"result", run.result}});
  }
  const auto summarise = [&out](const char* key, const std::vector<double>& values) {
    if (const auto s = spread(values)) out["summary"][key] = {{"n", s->n}, {"mean", s->mean}, {"std", s->std}};
  };
  for (const char* key : {"test_accuracy", "time_to_target_s", "elapsed_s"}) summarise(key, column(runs, key));
  std::vector<double> walls;
  for (const SweepRun& run : runs) walls.push_back(run.wall_s);
  summarise("process_wall_s", walls);
  return out;
}

}  // namespace gputrain::report
