#include "epoch_log.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gputrain/train/evaluate.h"

namespace gputrain::train::detail {

namespace {
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

// ", 13.2 TFLOP/s (1.34% of peak)": three significant figures, whatever the device's scale.
std::string efficiency_text(const EpochMetrics& m) {
  if (!m.tflops) return "";
  return fmt::format(", {:.3g} TFLOP/s{}", *m.tflops,
                     m.peak_share ? fmt::format(" ({:.3g}% of peak)", 100.0 * *m.peak_share) : "");
}
}  // namespace

void EpochLog::on_epoch(const EpochMetrics& m) {
  if (!m.has_test) return;  // a forward-only epoch has no figures to tell
  spdlog::info("Epoch {}/{}: train loss {:.4f}{}, {:.0f} samples/s{}, {:.1f} s (loader wait {:.2f} s{}){}{}", m.epoch,
               epochs_, m.train.mean_loss(),
               m.train.classification ? fmt::format(", accuracy {:.2f}%", 100.0 * m.train.accuracy()) : "",
               m.samples_per_s, efficiency_text(m), m.epoch_s, m.loader_wait_s,
               m.gpu_busy ? fmt::format(", GPU busy {:.0f}%", 100.0 * *m.gpu_busy) : "",
               fp16_                 ? fmt::format(", loss scale {}, {} steps skipped", m.loss_scale, m.skipped_steps)
               : m.skipped_steps > 0 ? fmt::format(", {} steps skipped for a non-finite loss", m.skipped_steps)
                                     : "",
               m.cuda ? fmt::format(", memory allocated {:.2f} GiB, reserved {:.2f} GiB, peak {:.2f} GiB",
                                    gib(m.memory_allocated), gib(m.memory_reserved), gib(m.memory_peak))
                      : "");
  spdlog::info("{}", format_test_line(m.test));
}

}  // namespace gputrain::train::detail
