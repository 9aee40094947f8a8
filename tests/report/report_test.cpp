#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/config/load.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_info.h"
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
    writer.on_step({1, 50, 0.5, 0.8, 1000.0, 0.01, 2.5});
    train::EpochMetrics epoch;
    epoch.epoch = 1;
    epoch.step = 60;
    epoch.train = {30.0, 48, 60, true};
    epoch.test = {5.0, 9, 10, true};
    epoch.has_test = true;
    epoch.samples_per_s = 1200;
    epoch.lr = 0.01;
    epoch.elapsed_s = 3.0;
    epoch.loader_wait_s = 0.125;
    writer.on_epoch(epoch);
  }
  const auto lines = read_jsonl(dir / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    for (const char* key : {"epoch", "step", "split", "loss", "accuracy", "samples_per_s", "lr", "elapsed_s"}) {
      EXPECT_TRUE(line.contains(key)) << key << " in " << line;
    }
  }
  EXPECT_EQ(lines[0]["split"], "train");
  EXPECT_DOUBLE_EQ(lines[1]["loss"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(lines[1]["loader_wait_s"].get<double>(), 0.125);
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
    writer.on_step({1, 50, 0.5, std::nullopt, 1000.0, 0.01, 2.5});
    train::EpochMetrics epoch;
    epoch.epoch = 1;
    epoch.train = {30.0, 0, 60, false};
    epoch.test = {5.0, 0, 10, false};
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

TEST(RunInfo, DescribesStrategyAndSplitsAndRoundTrips) {
  const auto config =
      config::load_config_text("name: r\ndata: {batch_size: 40}\ntrain: {accumulation_steps: 2, epochs: 3}\n", "x")
          .config;
  train::TrainLayout layout;
  layout.strategy.kind = parallel::StrategyKind::kDistributed;
  layout.strategy.replicas = {torch::Device(torch::kCPU)};
  layout.strategy.reason = "strategy: ddp, world size 3";
  layout.world_size = 3;
  layout.train_samples = 50;
  layout.micro_batch = 20;
  layout.last_micro_batch = 10;
  layout.steps_per_epoch = 2;
  layout.classification = false;
  RunInfo info = describe_run(config, layout);
  EXPECT_EQ(info.strategy, "ddp");
  EXPECT_EQ(info.replicas, (std::vector<std::string>{"rank 0", "rank 1", "rank 2"}));
  EXPECT_EQ(info.task, "regression");
  ASSERT_EQ(info.full_split.size(), 3u);  // 20 rows: 7, 7, 6
  EXPECT_EQ(info.full_split[2].rows(), 6);
  ASSERT_EQ(info.last_split.size(), 3u);  // 10 rows: 4, 4, 2
  EXPECT_EQ(info.last_split[2].rows(), 2);
  EXPECT_EQ(info.status, "running");
  EXPECT_FALSE(info.started.empty());
  end_run(info, "failed", "boom");

  testing::TempDir dir;
  write_run_info(dir / "run.json", info);
  const RunInfo back = read_run_info(dir / "run.json");
  EXPECT_EQ(back.status, "failed");
  EXPECT_EQ(back.error, "boom");
  EXPECT_EQ(back.ended, info.ended);
  EXPECT_EQ(back.epochs, 3);
  EXPECT_EQ(back.accumulation_steps, 2);
  EXPECT_EQ(back.last_split.size(), 3u);
  EXPECT_EQ(back.last_split[1].device, "rank 1");
  EXPECT_EQ(back.last_split[1].begin, 4);

  testing::write_text(dir / "bad.json", "[1, 2]");
  EXPECT_THROW(read_run_info(dir / "bad.json"), UserError);
  EXPECT_THROW(read_run_info(dir / "missing.json"), UserError);
}

TEST(RunDir, WritesTheResolvedConfigAndKeepsEarlierMetrics) {
  testing::TempDir dir;
  const auto config = config::load_config_text("name: demo\noutput: {dir: " + dir.path().string() + "}\n", "x").config;
  const RunPaths first = prepare_run_dir(config);
  EXPECT_EQ(first.dir, dir / "demo");
  const auto reloaded = config::load_config(first.config.string());
  EXPECT_EQ(config::dump_config(reloaded.config), config::dump_config(config));
  testing::write_text(first.metrics, "{\"old\": true}\n");
  prepare_run_dir(config);
  EXPECT_FALSE(std::filesystem::exists(first.metrics));
  EXPECT_TRUE(std::filesystem::exists(first.dir / "metrics.1.jsonl"));
}

TEST(RunDir, EarlierEventFilesMoveToARunOfTheirOwn) {
  testing::TempDir dir;
  const auto config = config::load_config_text("name: demo\noutput: {dir: " + dir.path().string() + "}\n", "x").config;
  const RunPaths first = prepare_run_dir(config);
  const std::string old_events = "events.out.tfevents.100.host.7.0";
  testing::write_text(first.dir / old_events, "first run");
  prepare_run_dir(config, /*resuming=*/true);  // a resumed run continues the same curves
  EXPECT_TRUE(std::filesystem::exists(first.dir / old_events));

  prepare_run_dir(config);
  EXPECT_FALSE(std::filesystem::exists(first.dir / old_events));
  EXPECT_EQ(testing::read_text(first.dir / "events.1" / old_events), "first run");
  testing::write_text(first.dir / old_events, "second run");
  prepare_run_dir(config);
  EXPECT_EQ(testing::read_text(first.dir / "events.2" / old_events), "second run");
  EXPECT_EQ(testing::read_text(first.dir / "events.1" / old_events), "first run");
}

TEST(RunDir, UnwritableOutputIsAUserError) {
  testing::TempDir dir;
  testing::write_text(dir / "file", "not a directory");
  const auto config = config::load_config_text("output: {dir: " + (dir / "file").string() + "}\n", "x").config;
  EXPECT_THROW(prepare_run_dir(config), UserError);
}

TEST(RunDir, WeightsNameTakenByADirectoryIsRefusedBeforeTraining) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "demo" / "model.pt");
  const auto config = config::load_config_text("name: demo\noutput: {dir: " + dir.path().string() + "}\n", "x").config;
  EXPECT_THROW(prepare_run_dir(config), UserError);
}

// A directory only its owner, root, may write to. The checks run as nobody in
// a child process, since root ignores permission bits.
class ReadOnlyDir : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    fs::permissions(dir_.path(), fs::perms::group_write | fs::perms::others_write, fs::perm_options::remove);
  }
  // "UserError: <message>" when `body` throws one as nobody.
  static testing::ProcessResult user_error_without_root(const std::function<void()>& body) {
    return testing::run_in_child(
        [&] {
          try {
            body();
          } catch (const UserError& e) {
            return std::string("UserError: ") + e.what();
          }
          return std::string("no error");
        },
        testing::without_root());
  }
  testing::TempDir dir_;
};

TEST_F(ReadOnlyDir, RunDirectoryInsideIsAUserError) {
  const auto config = config::load_config_text("output: {dir: " + dir_.path().string() + "}\n", "x").config;
  const auto r = user_error_without_root([&] { prepare_run_dir(config); });
  if (r.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot give up root here";
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("UserError: " + (dir_ / "experiment").string() + ": cannot create the run directory", 0), 0u)
      << r.out;
  EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
}

TEST_F(ReadOnlyDir, MetricsFileInsideIsAUserError) {
  const auto r = user_error_without_root([&] { MetricsWriter writer(dir_ / "metrics.jsonl"); });
  if (r.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot give up root here";
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("UserError: " + (dir_ / "metrics.jsonl").string() + ": cannot open the metrics file", 0), 0u)
      << r.out;
  EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
}

TEST(MetricsWriter, FullDiskLeavesOnlyWholeLines) {
  testing::TempDir dir;
  const auto path = dir / "metrics.jsonl";
  // 1000 bytes hold a few records; the write that crosses the limit fails with EFBIG, as on a full disk.
  const auto r = testing::run_in_child(
      [&] {
        MetricsWriter writer(path);
        for (int64_t step = 1; step <= 100; ++step) writer.on_step({1, step, 0.5, 0.8, 1000.0, 0.01, 2.5});
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

TEST(ConsoleReporter, BarShowsStepRateLossAndEta) {
  train::Progress p{2, 10, 5, 20, 640, 2.0, 0.4321};
  const std::string bar = ConsoleReporter::render_bar(p, 20);
  EXPECT_EQ(bar, "epoch 2/10 [=====>              ] 5/20 320 samples/s loss 0.4321 ETA 6s");
}

}  // namespace
}  // namespace gputrain::report
