#include "gputrain/report/run_dir.h"

#include <gtest/gtest.h>

#include "gputrain/config/load.h"
#include "gputrain/report/metrics_writer.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

RunDirOptions run_dir(const std::filesystem::path& dir, bool resuming = false) {
  return {dir, "name: demo\n", resuming};
}

TEST(RunDir, WritesTheResolvedConfigAndKeepsEarlierMetrics) {
  testing::TempDir dir;
  const RunPaths first = prepare_run_dir(run_dir(dir / "demo"));
  EXPECT_EQ(first.dir, dir / "demo");
  EXPECT_EQ(testing::read_text(first.config), "name: demo\n");
  testing::write_text(first.metrics, "{\"old\": true}\n");
  prepare_run_dir(run_dir(dir / "demo"));
  EXPECT_FALSE(std::filesystem::exists(first.metrics));
  EXPECT_TRUE(std::filesystem::exists(first.dir / "metrics.1.jsonl"));
}

TEST(RunDir, OptionsFromAConfigNameItsDirectoryAndHoldItsDump) {
  plan::RunPlan run;
  config::ExperimentConfig& config = run.loaded.config;
  config.name = "demo";
  config.output.dir = "/runs";
  config.train.epochs = 7;
  config.data.root = "data";  // as loading resolves it
  run.batch.global = 128;
  const RunDirOptions options = run_dir_options(run, /*resuming=*/true);
  EXPECT_EQ(options.dir, std::filesystem::path("/runs/demo"));
  EXPECT_TRUE(options.resuming);
  const auto reloaded = config::load_config_text(options.resolved_config, "config.yaml");
  EXPECT_EQ(config::dump_config(reloaded.config), config::dump_config(config));
}

// data.batch_size: auto measures; config.yaml records what it chose, so that
// training from it repeats the run without measuring again. The run's own
// config (and its checkpoints') stays auto.
TEST(RunDir, TheConfigFileRecordsTheMeasuredBatch) {
  plan::RunPlan run;
  config::ExperimentConfig& config = run.loaded.config;
  config.name = "demo";
  config.data.root = "data";
  config.data.batch_size = std::nullopt;
  config.train.target_batch = 48;
  run.batch.global = 48;
  run.batch.accumulation = 4;
  run.batch.test = 12;
  const auto reloaded = config::load_config_text(run_dir_options(run, false).resolved_config, "config.yaml").config;
  EXPECT_EQ(reloaded.data.batch_size, 48);
  EXPECT_EQ(reloaded.train.accumulation_steps, 4);
  EXPECT_EQ(reloaded.data.test_batch_size, 12);
  EXPECT_FALSE(run.loaded.config.data.batch_size) << "the plan's config is left as written";
  // A stated batch is recorded as stated: data.micro_batch_size alone stays the micro-batch form.
  config.data.micro_batch_size = 12;
  config.train.target_batch = 0;
  const auto micro = config::load_config_text(run_dir_options(run, false).resolved_config, "config.yaml").config;
  EXPECT_FALSE(micro.data.batch_size);
  EXPECT_EQ(micro.data.micro_batch_size, 12);
}

TEST(RunDir, EarlierEventFilesMoveToARunOfTheirOwn) {
  testing::TempDir dir;
  const RunPaths first = prepare_run_dir(run_dir(dir / "demo"));
  const std::string old_events = "events.out.tfevents.100.host.7.0";
  testing::write_text(first.dir / old_events, "first run");
  prepare_run_dir(run_dir(dir / "demo", /*resuming=*/true));  // a resumed run continues the same curves
  EXPECT_TRUE(std::filesystem::exists(first.dir / old_events));

  prepare_run_dir(run_dir(dir / "demo"));
  EXPECT_FALSE(std::filesystem::exists(first.dir / old_events));
  EXPECT_EQ(testing::read_text(first.dir / "events.1" / old_events), "first run");
  testing::write_text(first.dir / old_events, "second run");
  prepare_run_dir(run_dir(dir / "demo"));
  EXPECT_EQ(testing::read_text(first.dir / "events.2" / old_events), "second run");
  EXPECT_EQ(testing::read_text(first.dir / "events.1" / old_events), "first run");
}

// Issue 37 #5: a fresh run would replace a finished run's config, report and
// checkpoints; it is refused before anything in the directory changes.
TEST(RunDir, AFreshRunInAFinishedRunsDirectoryIsRefusedBeforeAnythingChanges) {
  testing::TempDir dir;
  const RunPaths paths = run_paths(dir / "demo");
  testing::write_text(paths.weights, "weights");
  testing::write_text(paths.config, "name: finished\n");
  testing::write_text(paths.metrics, "{\"old\": true}\n");
  EXPECT_NE(plan::finished_run_problem(paths.dir).find("holds a finished run"), std::string::npos);
  try {
    prepare_run_dir(run_dir(paths.dir));
    ADD_FAILURE() << "a fresh run replaced a finished one";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume auto"), std::string::npos) << e.what();
  }
  EXPECT_EQ(testing::read_text(paths.config), "name: finished\n");
  EXPECT_EQ(testing::read_text(paths.metrics), "{\"old\": true}\n");
  prepare_run_dir(run_dir(paths.dir, /*resuming=*/true));  // continuing it is allowed
  EXPECT_EQ(testing::read_text(paths.config), "name: demo\n");
  EXPECT_EQ(plan::finished_run_problem(dir / "other"), "");
}

TEST(RunDir, UnwritableOutputIsAUserError) {
  testing::TempDir dir;
  testing::write_text(dir / "file", "not a directory");
  EXPECT_THROW(prepare_run_dir(run_dir(dir / "file" / "experiment")), UserError);
}

TEST(RunDir, WeightsNameTakenByADirectoryIsRefusedBeforeTraining) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "demo" / "model.pt");
  EXPECT_THROW(prepare_run_dir(run_dir(dir / "demo")), UserError);
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
  const auto r = user_error_without_root([&] { prepare_run_dir(run_dir(dir_ / "experiment")); });
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

}  // namespace
}  // namespace gputrain::report
