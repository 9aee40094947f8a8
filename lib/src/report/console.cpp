#include "gputrain/report/console.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <string>

namespace gputrain::report {

ConsoleReporter::ConsoleReporter(bool terminal, std::FILE* stream) : terminal_(terminal), stream_(stream) {}

std::string ConsoleReporter::render_bar(const train::Progress& p, int width) {
  const double fraction = p.batches > 0 ? static_cast<double>(p.batch) / static_cast<double>(p.batches) : 0.0;
  const int filled = static_cast<int>(fraction * width);
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < width) bar += '>';
  bar.resize(static_cast<std::size_t>(width), ' ');
  const double rate = p.epoch_elapsed_s > 0 ? p.samples / p.epoch_elapsed_s : 0.0;
  const double eta = p.batch > 0 ? p.epoch_elapsed_s * (p.batches - p.batch) / p.batch : 0.0;
  return fmt::format("epoch {}/{} [{}] {}/{} {:.0f} samples/s loss {:.4f} ETA {:.0f}s", p.epoch, p.epochs, bar, p.batch,
                     p.batches, rate, p.last_loss, eta);
}

void ConsoleReporter::on_progress(const train::Progress& p) {
  if (!terminal_) return;
  // Redraw at most ten times a second, and always on the last batch.
  if (p.batch != p.batches && last_draw_s_ >= 0 && p.epoch_elapsed_s - last_draw_s_ < 0.1) return;
  last_draw_s_ = p.epoch_elapsed_s;
  std::fprintf(stream_, "\r\033[K%s", render_bar(p, 30).c_str());
  std::fflush(stream_);
  bar_open_ = true;
}

void ConsoleReporter::on_step(const train::StepMetrics& m) {
  // On a terminal the bar shows this; the log file still gets it at debug level.
  const auto level = terminal_ ? spdlog::level::debug : spdlog::level::info;
  const std::string accuracy = m.classification ? fmt::format(", accuracy {:.2f}%", 100.0 * m.accuracy) : "";
  spdlog::log(level, "epoch {} step {}: loss {:.4f}{}, {:.0f} samples/s, lr {:.6g}", m.epoch, m.step, m.loss, accuracy,
              m.samples_per_s, m.lr);
}

void ConsoleReporter::on_epoch(const train::EpochMetrics&) {
  if (!bar_open_) return;
  std::fputs("\n", stream_);
  std::fflush(stream_);
  bar_open_ = false;
  last_draw_s_ = -1;
}

}  // namespace gputrain::report
