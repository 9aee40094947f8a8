#include "metrics_log.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::report::detail {

namespace {

using Json = nlohmann::json;

void add_record(MetricsLog& log, MetricsRecord r) {
  if (r.kind == RecordKind::kInterval) {
    log.steps.push_back(std::move(r));
    return;
  }
  EpochRecord& e = log.epochs[r.epoch];
  e.epoch = r.epoch;
  (r.kind == RecordKind::kTest ? e.test : e.train) = std::move(r);
}

}  // namespace

Figure EpochRecord::step() const {
  const Count step = train && train->step ? train->step : test ? test->step : std::nullopt;
  return as_figure(step);
}

MetricsLog read_metrics_log(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read the metrics", path.string()));
  MetricsLog log;
  std::vector<int64_t> bad_lines;
  int64_t line_number = 0;
  int64_t last_line = 0;  // the last line with text
  int64_t records = 0;    // lines that are JSON objects
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (trim(line).empty()) continue;
    last_line = line_number;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      bad_lines.push_back(line_number);
      continue;
    }
    ++records;
    try {
      add_record(log, j.get<MetricsRecord>());
    } catch (const std::invalid_argument& e) {
      log.notes.push_back(
          fmt::format("Line {} of metrics.jsonl is {}, from a newer gputrain. It is left out.", line_number, e.what()));
    }
  }
  // Not one record, and more than a last line cut short: not a metrics log at all.
  if (records == 0 && !bad_lines.empty() && bad_lines.front() != last_line) {
    throw UserError(
        fmt::format("{}:{}: not a JSON object, and no line is: this is not the metrics log of a gputrain "
                    "run (one JSON record a line); give the directory `gputrain train` wrote",
                    path.string(), bad_lines.front()));
  }
  for (const int64_t n : bad_lines) {
    log.notes.push_back(
        n == last_line ? fmt::format("The last line of metrics.jsonl (line {}) is cut short: the run stopped while "
                                     "writing it. It is left out.",
                                     n)
                       : fmt::format("Line {} of metrics.jsonl is not a JSON object. It is left out.", n));
  }
  return log;
}

}  // namespace gputrain::report::detail
