#include "gputrain/report/metrics_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "metrics_record.h"

namespace gputrain::report {

MetricsWriter::MetricsWriter(const std::filesystem::path& path) : path_(path), out_(path, std::ios::app) {
  if (!out_) {
    throw UserError(
        fmt::format("{}: cannot open the metrics file for writing ({})", path.string(), std::strerror(errno)));
  }
  std::error_code error;
  whole_bytes_ = std::filesystem::file_size(path, error);
}

void MetricsWriter::write(const std::string& line) {
  out_ << line << '\n';
  out_.flush();  // a crashed run keeps every line written so far
  if (out_) {
    whole_bytes_ += line.size() + 1;
    return;
  }
  const int error = errno;
  // A full disk may have taken part of the line: cut the file back to its
  // last whole record, so that every line still parses.
  out_.close();
  std::error_code ignored;
  std::filesystem::resize_file(path_, whole_bytes_, ignored);
  throw Error(write_error_code(error),
              fmt::format("{}: cannot write metrics: {}", path_.string(), std::strerror(error)));
}

void MetricsWriter::write(const detail::MetricsRecord& record) { write(nlohmann::ordered_json(record).dump()); }

void MetricsWriter::on_step(const train::StepMetrics& m) { write(detail::interval_record(m)); }

void MetricsWriter::on_epoch(const train::EpochMetrics& m) {
  for (const detail::MetricsRecord& record : detail::epoch_records(m)) write(record);
}

}  // namespace gputrain::report
