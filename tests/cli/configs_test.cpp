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

}  // namespace
}  // namespace gputrain
