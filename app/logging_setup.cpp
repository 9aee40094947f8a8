#include "logging_setup.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <iostream>

namespace gputrain::app {

namespace {
constexpr const char* kConsolePattern = "[%Y-%m-%d %H:%M:%S.%e] {}[%^%l%$] %v";
constexpr std::size_t kEarlyLines = 10000;

std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt>& early_log() {
  static std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink;
  return sink;
}
}  // namespace

void keep_early_log() {
  early_log() = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(kEarlyLines);
  spdlog::default_logger()->sinks().push_back(early_log());
}

void drop_early_log() {
  if (!early_log()) return;
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), early_log()), sinks.end());
  early_log().reset();
}

void install_console_logging(const std::string& level) {
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("gputrain", console);
  logger->set_pattern(fmt::format(kConsolePattern, ""));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

void add_log_file(const std::string& path) {
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  if (early_log()) {
    for (const auto& line : early_log()->last_raw()) file->log(line);
    drop_early_log();
  }
  spdlog::default_logger()->sinks().push_back(file);
  spdlog::default_logger()->flush_on(spdlog::level::info);
  // Only the file sink fails in practice (a full disk); spdlog's own handler
  // would print a "*** LOG ERROR ***" banner for every line that fails.
  spdlog::default_logger()->set_error_handler([path](const std::string& problem) {
    static std::atomic<bool> said{false};
    if (said.exchange(true)) return;
    std::cerr << fmt::format("gputrain: cannot write the log file {} ({}); the log continues on stderr only\n", path,
                             problem)
              << std::flush;
  });
}

void set_rank_logging(int64_t rank) {
  auto logger = spdlog::default_logger();
  logger->sinks().front()->set_pattern(fmt::format(kConsolePattern, fmt::format("[rank {}] ", rank)));
  if (rank != 0 && logger->level() < spdlog::level::warn) logger->set_level(spdlog::level::warn);
}

}  // namespace gputrain::app
