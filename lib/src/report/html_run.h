#pragma once
// The HTML report's input: what a run directory holds (metrics.jsonl, run.json,
// config.yaml, device.json), read forgivingly, with a note for each thing missing.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/report/run_info.h"
#include "metrics_log.h"

namespace gputrain::report::detail {

// Everything the page is made from.
struct Run {
  std::filesystem::path dir;
  std::string name;
  std::optional<RunInfo> info;
  detail::MetricsLog metrics;
  std::optional<std::string> config_text;
  std::optional<nlohmann::ordered_json> device;
  std::vector<std::string> notes;  // plain text, escaped when written
  bool labeled = true;
  bool classification = true;
  bool fp16 = false;
};

// A UserError when `dir` holds no metrics.jsonl; anything else missing or
// unreadable becomes a note.
Run load_run(const std::filesystem::path& dir);

struct Status {
  std::string label;
  std::string css;
};

Status run_status(const Run& run);

// What the reader must know to read the charts right.
std::vector<std::string> partial_run_notes(const Run& run);

}  // namespace gputrain::report::detail
