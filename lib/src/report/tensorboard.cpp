#include "gputrain/report/tensorboard.h"

#include <fmt/format.h>

namespace gputrain::report {

namespace {
float gib(int64_t bytes) { return static_cast<float>(static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0)); }
float f(double value) { return static_cast<float>(value); }
}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& run_dir, const RunInfo& run)
    : file_(run_dir),
      labeled_(run.task != "unlabeled"),
      classification_(run.task == "classification"),
      fp16_(run.amp == config::AmpMode::kFp16) {}

void TensorBoardWriter::on_step(const train::StepMetrics& m) {
  std::vector<Scalar> s{{"train_step/samples_per_s", f(m.samples_per_s)}, {"train_step/lr", f(m.lr)}};
  if (labeled_) s.emplace_back("train_step/loss", f(m.loss));
  if (classification_ && m.accuracy) s.emplace_back("train_step/accuracy", f(*m.accuracy));
  if (fp16_) s.emplace_back("train_step/loss_scale", f(m.loss_scale));
  file_.add(m.step, s);
}

void TensorBoardWriter::on_epoch(const train::EpochMetrics& m) {
  std::vector<Scalar> s{{"train/samples_per_s", f(m.samples_per_s)},
                        {"train/lr", f(m.lr)},
                        {"train/epoch_s", f(m.epoch_s)},
                        {"train/loader_wait_s", f(m.loader_wait_s)}};
  if (m.gpu_busy) s.emplace_back("train/gpu_busy", f(*m.gpu_busy));
  if (labeled_) s.emplace_back("train/loss", f(m.train.mean_loss()));
  if (classification_) s.emplace_back("train/accuracy", f(m.train.accuracy()));
  if (m.has_test) {
    s.emplace_back("test/loss", f(m.test.mean_loss()));
    if (classification_) s.emplace_back("test/accuracy", f(m.test.accuracy()));
  }
  if (fp16_) s.emplace_back("train/loss_scale", f(m.loss_scale));
  if (m.cuda) {
    s.emplace_back("gpu/memory_allocated_gib", gib(m.memory_allocated));
    s.emplace_back("gpu/memory_reserved_gib", gib(m.memory_reserved));
    s.emplace_back("gpu/memory_peak_gib", gib(m.memory_peak));
  }
  for (const auto& g : m.gpus) {
    const std::string prefix = fmt::format("gpu/cuda{}_", g.index);
    s.emplace_back(prefix + "util_mean", f(g.util_mean));
    s.emplace_back(prefix + "util_max", f(g.util_max));
    s.emplace_back(prefix + "memory_used_gib", gib(g.memory_used_max));
    if (g.power_mean_w) s.emplace_back(prefix + "power_w", f(*g.power_mean_w));
    if (g.temperature_max_c) s.emplace_back(prefix + "temperature_c", f(*g.temperature_max_c));
  }
  // Forward-only (unlabeled) runs take no optimizer steps: their axis is the epoch.
  file_.add(labeled_ ? m.step : m.epoch, s);
}

}  // namespace gputrain::report
