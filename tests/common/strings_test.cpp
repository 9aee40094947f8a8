#include <gtest/gtest.h>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain {

TEST(Strings, EditDistance) {
  EXPECT_EQ(edit_distance("batch_size", "batch_size"), 0u);
  EXPECT_EQ(edit_distance("batchsize", "batch_size"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Strings, ClosestMatchSuggestsOnlyPlausibleTypos) {
  const std::vector<std::string> keys{"batch_size", "num_workers", "pin_memory"};
  EXPECT_EQ(closest_match("batch_sise", keys), "batch_size");
  EXPECT_EQ(closest_match("num_worker", keys), "num_workers");
  EXPECT_EQ(closest_match("learning_rate", keys), "");
}

TEST(Strings, JoinChoicesAndSplit) {
  EXPECT_EQ(join_choices({"a"}), "a");
  EXPECT_EQ(join_choices({"off", "fp16", "bf16"}), "off, fp16 or bf16");
  EXPECT_EQ(split("0,1,,2", ','), (std::vector<std::string>{"0", "1", "", "2"}));
  EXPECT_EQ(trim("  x y \n"), "x y");
}

TEST(Errors, ConfigErrorReadsLikeACompilerError) {
  const ConfigError error({"configs/a.yaml", 12, 15}, "data.batch_size", "must be >= 1 (got -4)");
  EXPECT_STREQ(error.what(), "configs/a.yaml:12:15: data.batch_size: must be >= 1 (got -4)");
  EXPECT_EQ(error.code(), ExitCode::kUserInput);
}

TEST(Errors, ExitCodesByKind) {
  EXPECT_EQ(DataError("x").code(), ExitCode::kUserInput);
  EXPECT_EQ(DeviceError("x").code(), ExitCode::kUserInput);
  EXPECT_EQ(CheckpointError("x").code(), ExitCode::kUserInput);
  EXPECT_EQ(DistributedError("x").code(), ExitCode::kRuntime);
  EXPECT_EQ(Interrupted("x").code(), ExitCode::kInterrupted);
}

}  // namespace gputrain
