// `gputrain configs`: a config printed by name trains from another folder.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain {
namespace {

namespace fs = std::filesystem;
using testing::run_gputrain;

TEST(ConfigsCommand, APrintedConfigTrainsInAnotherFolder) {
  testing::TempDir dir;
  const testing::ProcessResult printed = run_gputrain({"configs", "seed_mlp"}, {}, dir.path().string());
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_EQ(printed.out, testing::read_text(fs::path(testing::kSourceDir) / "configs" / "seed_mlp.yaml"));
  testing::write_text(dir / "mine.yaml", printed.out);
  const testing::ProcessResult trained = run_gputrain(
      {"train", "--config", "mine.yaml", "--set", "train.epochs=1", "--set", "device=cpu"}, {}, dir.path().string());
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_TRUE(fs::exists(dir / "runs" / "seed-mlp" / "model.pt"));
}

TEST(ConfigsCommand, ListsEveryShippedConfigOnALine) {
  const testing::ProcessResult r = run_gputrain({"configs"}, {}, "/");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& entry : fs::directory_iterator(fs::path(testing::kSourceDir) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NE(("\n" + r.out).find("\n" + entry.path().stem().string() + " "), std::string::npos)
        << entry.path().stem() << " is not listed:\n"
        << r.out;
  }
}

// A config that extends others is printed merged: saved in another folder, away
// from its bases, it is the same config.
TEST(ConfigsCommand, AStackedConfigPrintedIsTheSameConfigInAnotherFolder) {
  testing::TempDir dir;
  const testing::ProcessResult printed = run_gputrain({"configs", "fashion_mnist_fast"}, {}, dir.path().string());
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_NE(printed.out.find("fashion_mnist_base.yaml + fashion_mnist_resnet.yaml + fashion_mnist_fast.yaml merged"),
            std::string::npos)
      << printed.out;
  testing::write_text(dir / "mine.yaml", printed.out);
  const testing::ProcessResult mine = run_gputrain({"config", "--config", "mine.yaml"}, {}, dir.path().string());
  const testing::ProcessResult shipped = run_gputrain({"config", "--config", "configs/fashion_mnist_fast.yaml"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
  EXPECT_EQ(mine.out, shipped.out);
}

// --config twice trains the two merged, and the run's checkpoint holds the
// merged config: resumed (or read back by `config --resume`), it is the same.
TEST(ConfigsCommand, AStackedRunStoresTheMergedConfig) {
  testing::TempDir dir;
  const auto base = testing::write_text(dir / "base.yaml", R"(
name: stacked
device: cpu
data: {dataset: synthetic, samples: 32, test_samples: 16, features: 4, classes: 2, batch_size: 16, num_workers: 0}
model: {name: mlp, hidden: [8]}
train: {epochs: 1, tensorboard: false}
checkpoint: {every: 1}
)");
  const auto over = testing::write_text(dir / "over.yaml", "data: {batch_size: 8}\nmodel: {hidden: [4, 4]}\n");
  const std::vector<std::string> configs{"--config", base.string(), "--config", over.string()};
  std::vector<std::string> train{"train", "--output", (dir / "runs").string()};
  train.insert(train.end(), configs.begin(), configs.end());
  const testing::ProcessResult trained = run_gputrain(train);
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_NE(trained.err.find("from " + base.string() + " + " + over.string()), std::string::npos) << trained.err;
  std::vector<std::string> show{"config", "--set", "output.dir=" + (dir / "runs").string()};
  show.insert(show.end(), configs.begin(), configs.end());
  const testing::ProcessResult merged = run_gputrain(show);
  fs::path checkpoint;
  for (const auto& entry : fs::directory_iterator(dir / "runs" / "stacked" / "checkpoints")) {
    if (entry.path().filename().string().rfind("ckpt-", 0) == 0) checkpoint = entry.path();
  }
  const testing::ProcessResult stored = run_gputrain({"config", "--resume", checkpoint.string()});
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_NE(stored.out.find("batch_size: 8\n"), std::string::npos) << stored.out;
  EXPECT_NE(stored.out.find("hidden: [4, 4]\n"), std::string::npos) << stored.out;
  EXPECT_EQ(stored.out, merged.out);
  const std::string written = testing::read_text(dir / "runs" / "stacked" / "config.yaml");
  EXPECT_EQ(written.substr(written.find('\n') + 1), merged.out);  // after its "# resolved by gputrain" line
}

}  // namespace
}  // namespace gputrain
