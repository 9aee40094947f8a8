#include "gputrain/report/metrics_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"

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

void MetricsWriter::on_step(const train::StepMetrics& m) {
  nlohmann::ordered_json j{{"epoch", m.epoch}, {"step", m.step}, {"split", "train"}, {"loss", m.loss}};
  if (m.accuracy) j["accuracy"] = *m.accuracy;  // regression has none
  j["samples_per_s"] = m.samples_per_s;
  j["lr"] = m.lr;
  j["elapsed_s"] = m.elapsed_s;
  j["loss_scale"] = m.loss_scale;
  j["skipped_steps"] = m.skipped_steps;
  write(j.dump());
}

void MetricsWriter::on_epoch(const train::EpochMetrics& m) {
  nlohmann::ordered_json train{{"epoch", m.epoch}, {"step", m.step}, {"split", "train"}, {"loss", m.train.mean_loss()}};
  if (m.train.classification) train["accuracy"] = m.train.accuracy();
  train.update(nlohmann::ordered_json{{"samples_per_s", m.samples_per_s},
                                      {"lr", m.lr},
                                      {"elapsed_s", m.elapsed_s},
                                      {"epoch_s", m.epoch_s},
                                      {"samples", m.train.samples},
                                      {"loss_scale", m.loss_scale},
                                      {"skipped_steps", m.skipped_steps},
                                      {"loader_wait_s", m.loader_wait_s}});
  if (m.cuda) {
    train["memory_allocated"] = m.memory_allocated;
    train["memory_reserved"] = m.memory_reserved;
    train["memory_peak"] = m.memory_peak;
  }
  if (!m.gpus.empty()) {
    nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
    for (const auto& g : m.gpus) {
      nlohmann::ordered_json gpu{{"index", g.index},
                                 {"util_mean", g.util_mean},
                                 {"util_max", g.util_max},
                                 {"memory_used", g.memory_used_max},
                                 {"samples", g.samples}};
      if (g.power_mean_w) gpu["power_w"] = *g.power_mean_w;
      if (g.temperature_max_c) gpu["temperature_c"] = *g.temperature_max_c;
      gpus.push_back(gpu);
    }
    train["gpus"] = gpus;
  }
  write(train.dump());
  if (!m.has_test) return;
  nlohmann::ordered_json test{{"epoch", m.epoch}, {"step", m.step}, {"split", "test"}, {"loss", m.test.mean_loss()}};
  if (m.test.classification) test["accuracy"] = m.test.accuracy();
  test.update(nlohmann::ordered_json{{"samples_per_s", m.samples_per_s}, {"lr", m.lr}, {"elapsed_s", m.elapsed_s}});
  if (m.test.classification) test["correct"] = m.test.correct;
  test["samples"] = m.test.samples;
  if (!m.test.confusion.empty()) {
    // Rows are the true classes, columns the predicted ones.
    const auto classes = static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(m.test.confusion.size()))));
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    nlohmann::ordered_json per_class = nlohmann::ordered_json::array();
    for (std::size_t c = 0; c < classes; ++c) {
      const auto first = m.test.confusion.begin() + static_cast<std::ptrdiff_t>(c * classes);
      const std::vector<int64_t> row(first, first + static_cast<std::ptrdiff_t>(classes));
      int64_t total = 0;
      for (int64_t n : row) total += n;
      per_class.push_back(total > 0 ? nlohmann::ordered_json(static_cast<double>(row[c]) / static_cast<double>(total))
                                    : nlohmann::ordered_json());
      rows.push_back(row);
    }
    test["per_class_accuracy"] = per_class;
    test["confusion"] = rows;
  }
  write(test.dump());
}

}  // namespace gputrain::report
