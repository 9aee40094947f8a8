#include "report/run_fixture.h"

#include <fstream>

#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_info.h"
#include "support/temp_dir.h"

namespace gputrain::testing {

namespace {

namespace fs = std::filesystem;

report::RunInfo dp_run(report::RunStatus status) {
  report::RunInfo info;
  info.name = "fixture-run";
  info.started = "2025-01-31 14:05:09";
  info.status = status;
  if (status != report::RunStatus::kRunning) info.ended = "2025-01-31 14:06:10";
  info.device = "cuda:0";
  info.strategy = "dp";
  info.strategy_reason = "one replica per selected GPU (2)";
  info.replicas = {"cuda:0", "cuda:1"};
  info.task = report::Task::kClassification;
  info.amp = gputrain::config::AmpMode::kFp16;
  info.epochs = 3;
  info.steps_per_epoch = 4;
  info.train_samples = 100;
  info.batch_size = 30;
  info.accumulation_steps = 1;
  info.micro_batch = 30;
  info.last_micro_batch = 10;
  info.full_split = parallel::split_batch(30, info.replicas);
  info.last_split = parallel::split_batch(10, info.replicas);
  return info;
}

void write_steps(report::MetricsWriter& writer, int64_t epoch) {
  for (int64_t i = 1; i <= 2; ++i) {
    const int64_t step = (epoch - 1) * 4 + 2 * i;
    writer.on_step({epoch,
                    step,
                    2.0 / static_cast<double>(step),
                    0.3 + 0.05 * static_cast<double>(step),
                    900.0 + 10.0 * static_cast<double>(step),
                    0.1,
                    0.5 * static_cast<double>(step),
                    step == 6 ? 32768.0 : 65536.0,
                    step >= 6 ? 1 : 0,
                    {}});
  }
}

train::EpochMetrics epoch_metrics(int64_t epoch, bool with_test) {
  train::EpochMetrics m;
  m.epoch = epoch;
  m.step = epoch * 4;
  m.train.loss_sum = 100.0 / static_cast<double>(epoch);
  m.train.correct = 50 + 10 * epoch;
  m.train.samples = 100;
  m.test.loss_sum = 20.0 / static_cast<double>(epoch);
  m.test.correct = 20 + 5 * epoch;
  m.test.samples = 40;
  m.has_test = with_test;
  m.epoch_s = 0.1 * static_cast<double>(epoch);
  m.samples_per_s = 100.0 / m.epoch_s;
  m.elapsed_s = 2.5 * static_cast<double>(epoch);
  m.lr = 0.1;
  m.loss_scale = 65536;
  m.skipped_steps = epoch >= 2 ? 1 : 0;
  m.cuda = true;
  m.memory_allocated = int64_t{1} << 30;
  m.memory_reserved = int64_t{3} << 29;
  m.memory_peak = int64_t{1} << 31;
  m.loader_wait_s = 0.02 * static_cast<double>(epoch);
  m.tflops = 0.5 * static_cast<double>(epoch);
  m.peak_share = m.tflops.value() / 500;
  for (int64_t gpu = 0; gpu < 2; ++gpu) {
    train::GpuActivity a;
    a.index = gpu;
    a.samples = 5;
    a.util_mean = 40.0 + 10.0 * static_cast<double>(epoch) + 2.0 * static_cast<double>(gpu);
    a.util_max = 95.0;
    a.memory_used_max = int64_t{5} << 30;
    if (gpu == 0) a.power_mean_w = 210.5;
    a.temperature_max_c = 61;
    m.gpus.push_back(a);
  }
  return m;
}

void write_common_files(const fs::path& dir) {
  write_text(dir / "config.yaml",
             "# resolved by gputrain\n# a comment with <script>alert(\"x\")</script> & friends\nname: fixture-run\n"
             "strategy: dp\ntrain:\n  amp: fp16\n");
  write_text(dir / "device.json",
             R"({"gputrain_version": "0.1.0", "cuda_available": true, "cuda_visible_devices": null,)"
             R"( "gpus": [{"logical_index": 0, "name": "Fake <GPU> & \"Co\"", "total_memory_bytes": 85899345920},)"
             R"( {"logical_index": 1, "name": "Fake <GPU> & \"Co\"", "total_memory_bytes": 85899345920}]})");
}

}  // namespace

void write_finished_run(const fs::path& dir) {
  fs::create_directories(dir);
  write_common_files(dir);
  report::write_run_info(dir / "run.json", dp_run(report::RunStatus::kFinished));
  report::MetricsWriter writer(dir / "metrics.jsonl");
  for (int64_t epoch = 1; epoch <= 3; ++epoch) {
    write_steps(writer, epoch);
    writer.on_epoch(epoch_metrics(epoch, true));
  }
}

void write_interrupted_run(const fs::path& dir) {
  fs::create_directories(dir);
  write_common_files(dir);
  report::write_run_info(dir / "run.json", dp_run(report::RunStatus::kRunning));
  {
    report::MetricsWriter writer(dir / "metrics.jsonl");
    write_steps(writer, 1);
    writer.on_epoch(epoch_metrics(1, true));
    write_steps(writer, 2);
    writer.on_epoch(epoch_metrics(2, false));
  }
  std::ofstream(dir / "metrics.jsonl", std::ios::app) << R"({"epoch": 2, "step": 8, "split": "te)";
}

}  // namespace gputrain::testing
