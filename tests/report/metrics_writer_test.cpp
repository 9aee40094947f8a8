#include "gputrain/report/metrics_writer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(MetricsWriter, WritesTheSchemaForStepsAndEpochs) {
  testing::TempDir dir;
  {
    MetricsWriter writer(dir / "metrics.jsonl");
    writer.on_step({1, 50, 0.5, 0.8, 1000.0, 0.01, 2.5, 1, 0, std::nullopt});
    train::EpochMetrics epoch;
    epoch.epoch = 1;
    epoch.step = 60;
    epoch.train = {30.0, 48, 60, true, {}, {}};
    epoch.test = {5.0, 9, 10, true, {}, {}};
    epoch.has_test = true;
    epoch.samples_per_s = 1200;
    epoch.lr = 0.01;
    epoch.elapsed_s = 3.0;
    epoch.loader_wait_s = 0.125;
    epoch.gpu_busy = 0.75;
    epoch.tflops = 13.25;
    epoch.peak_share = 0.0267;
    writer.on_epoch(epoch);
  }
  const auto lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    for (const char* key : {"kind", "epoch", "step", "split", "loss", "accuracy", "samples_per_s", "lr", "elapsed_s"}) {
      EXPECT_TRUE(line.contains(key)) << key << " in " << line;
    }
  }
  EXPECT_EQ(lines[0]["kind"], "interval");
  EXPECT_EQ(lines[1]["kind"], "epoch");
  EXPECT_EQ(lines[2]["kind"], "test");
  EXPECT_EQ(lines[0]["split"], "train");
  EXPECT_DOUBLE_EQ(lines[1]["loss"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(lines[1]["loader_wait_s"].get<double>(), 0.125);
  EXPECT_DOUBLE_EQ(lines[1]["gpu_busy"].get<double>(), 0.75) << "the CUDA events' share of the epoch";
  EXPECT_DOUBLE_EQ(lines[1]["tflops"].get<double>(), 13.25);
  EXPECT_DOUBLE_EQ(lines[1]["peak_share"].get<double>(), 0.0267);
  EXPECT_FALSE(lines[1].contains("gpus")) << "not monitored: no GPU figures";
  EXPECT_EQ(lines[2]["split"], "test");
  EXPECT_DOUBLE_EQ(lines[2]["accuracy"].get<double>(), 0.9);
  EXPECT_EQ(lines[2]["correct"], 9);
}

// A regression run has no accuracy: none is written as 0.
TEST(MetricsWriter, RegressionRecordsCarryNoAccuracy) {
  testing::TempDir dir;
  {
    MetricsWriter writer(dir / "metrics.jsonl");
    writer.on_step({1, 50, 0.5, std::nullopt, 1000.0, 0.01, 2.5, 1, 0, std::nullopt});
    train::EpochMetrics epoch;
    epoch.epoch = 1;
    epoch.train = {30.0, 0, 60, false, {}, {}};
    epoch.test = {5.0, 0, 10, false, {}, {}};
    epoch.has_test = true;
    writer.on_epoch(epoch);
  }
  const auto lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    EXPECT_FALSE(line.contains("accuracy")) << line;
    EXPECT_FALSE(line.contains("correct")) << line;
    EXPECT_TRUE(line.contains("loss")) << line;
  }
  EXPECT_EQ(lines[2]["samples"], 10);
}

TEST(MetricsWriter, EpochRecordsCarryTheMonitorsGpuFigures) {
  testing::TempDir dir;
  {
    MetricsWriter writer(dir / "metrics.jsonl");
    train::EpochMetrics epoch;
    epoch.epoch = 1;
    train::GpuActivity gpu;
    gpu.index = 1;
    gpu.samples = 4;
    gpu.util_mean = 42.5;
    gpu.util_max = 90;
    gpu.memory_used_max = 1 << 20;
    gpu.temperature_max_c = 60;
    epoch.gpus = {gpu};
    writer.on_epoch(epoch);
  }
  const auto lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  const auto& g = lines[0]["gpus"][0];
  EXPECT_EQ(g["index"], 1);
  EXPECT_DOUBLE_EQ(g["util_mean"].get<double>(), 42.5);
  EXPECT_DOUBLE_EQ(g["util_max"].get<double>(), 90.0);
  EXPECT_EQ(g["memory_used"], 1 << 20);
  EXPECT_EQ(g["samples"], 4);
  EXPECT_FALSE(g.contains("power_w")) << "not reported: left out";
  EXPECT_DOUBLE_EQ(g["temperature_c"].get<double>(), 60.0);
}

TEST(MetricsWriter, FullDiskLeavesOnlyWholeLines) {
  testing::TempDir dir;
  const auto path = dir / "metrics.jsonl";
  // 1000 bytes hold a few records; the write that crosses the limit fails with EFBIG, as on a full disk.
  const auto r = testing::run_in_child(
      [&] {
        MetricsWriter writer(path);
        for (int64_t step = 1; step <= 100; ++step)
          writer.on_step({1, step, 0.5, 0.8, 1000.0, 0.01, 2.5, 1, 0, std::nullopt});
        return std::string("all written");
      },
      testing::file_size_limit(1000));
  if (r.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(path.string() + ": cannot write metrics: File too large"), std::string::npos) << r.out;
  const auto lines = read_jsonl(path);  // throws on a half-written line
  EXPECT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.back()["step"], static_cast<int64_t>(lines.size()));
  EXPECT_LE(std::filesystem::file_size(path), 1000u);
}

}  // namespace
}  // namespace gputrain::report
