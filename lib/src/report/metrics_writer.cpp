#include "gputrain/report/metrics_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
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

void MetricsWriter::on_step(const train::StepMetrics& m) {
  detail::MetricsRecord r;
  r.kind = detail::RecordKind::kInterval;
  r.epoch = m.epoch;
  r.step = m.step;
  r.loss = m.loss;
  r.accuracy = m.accuracy;  // regression has none
  r.samples_per_s = m.samples_per_s;
  r.lr = m.lr;
  r.elapsed_s = m.elapsed_s;
  r.loss_scale = m.loss_scale;
  r.skipped_steps = m.skipped_steps;
  r.ranks = m.ranks;
  write(r);
}

void MetricsWriter::on_epoch(const train::EpochMetrics& m) {
  detail::MetricsRecord train;
  train.kind = detail::RecordKind::kEpoch;
  train.epoch = m.epoch;
  train.step = m.step;
  train.loss = m.train.mean_loss();
  if (m.train.classification) train.accuracy = m.train.accuracy();
  train.samples_per_s = m.samples_per_s;
  train.lr = m.lr;
  train.elapsed_s = m.elapsed_s;
  train.epoch_s = m.epoch_s;
  train.samples = m.train.samples;
  train.loss_scale = m.loss_scale;
  train.skipped_steps = m.skipped_steps;
  train.loader_wait_s = m.loader_wait_s;
  train.gpu_busy = m.gpu_busy;
  if (m.cuda) {
    train.memory_allocated = m.memory_allocated;
    train.memory_reserved = m.memory_reserved;
    train.memory_peak = m.memory_peak;
  }
  for (const auto& g : m.gpus) {
    train.gpus.push_back(
        {g.index, g.samples, g.util_mean, g.util_max, g.power_mean_w, g.temperature_max_c, g.memory_used_max});
  }
  write(train);
  if (!m.has_test) return;
  detail::MetricsRecord test;
  test.kind = detail::RecordKind::kTest;
  test.epoch = m.epoch;
  test.step = m.step;
  test.loss = m.test.mean_loss();
  if (m.test.classification) {
    test.accuracy = m.test.accuracy();
    test.correct = m.test.correct;
  }
  test.samples_per_s = m.samples_per_s;
  test.lr = m.lr;
  test.elapsed_s = m.elapsed_s;
  test.samples = m.test.samples;
  if (!m.test.confusion.empty()) {
    // Rows are the true classes, columns the predicted ones.
    const auto classes = static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(m.test.confusion.size()))));
    for (std::size_t c = 0; c < classes; ++c) {
      const auto first = m.test.confusion.begin() + static_cast<std::ptrdiff_t>(c * classes);
      const std::vector<int64_t> row(first, first + static_cast<std::ptrdiff_t>(classes));
      int64_t total = 0;
      for (int64_t n : row) total += n;
      test.per_class_accuracy.push_back(
          total > 0 ? detail::Figure(static_cast<double>(row[c]) / static_cast<double>(total)) : std::nullopt);
      test.confusion.push_back(row);
    }
  }
  write(test);
}

}  // namespace gputrain::report
