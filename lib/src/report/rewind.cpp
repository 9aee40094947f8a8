#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gputrain/checkpoint/store.h"
#include "gputrain/common/files.h"
#include "gputrain/report/metrics_writer.h"
#include "metrics_record.h"

namespace gputrain::report {

void rewind_metrics(const std::filesystem::path& path, int64_t step, bool before_test_pass) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // nothing written yet
  std::ostringstream kept;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: cut short by a crash
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("step") || !record["step"].is_number_integer()) continue;
    const auto at = record["step"].get<int64_t>();
    const bool epoch_record = detail::record_kind(record) != detail::RecordKind::kInterval;
    if (at < step || (at == step && !(epoch_record && before_test_pass))) kept << line << '\n';
  }
  write_atomically(path, kept.str());
}

}  // namespace gputrain::report
