#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/config/load.h"
#include "gputrain/report/console.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_dir.h"
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
  EXPECT_EQ(lines[2]["split"], "test");
  EXPECT_DOUBLE_EQ(lines[2]["accuracy"].get<double>(), 0.9);
  EXPECT_EQ(lines[2]["correct"], 9);
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
