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

TEST(Strings, ByteSizesReadWithTheirUnitsAndPrintAsTheyScale) {
  EXPECT_EQ(parse_bytes("4096"), 4096);
  EXPECT_EQ(parse_bytes("512B"), 512);
  EXPECT_EQ(parse_bytes("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_bytes(" 512 MiB "), int64_t{512} << 20);
  EXPECT_EQ(parse_bytes("1.5GB"), 1'500'000'000);
  EXPECT_EQ(parse_bytes("1e9"), 1'000'000'000);
  EXPECT_EQ(parse_bytes("3kb"), 3000);
  for (const char* bad : {"", "lots", "12 parsecs", "0", "-1GiB", "nan", "1e30"}) {
    EXPECT_FALSE(parse_bytes(bad).has_value()) << bad;
  }
  EXPECT_EQ(bytes_text(-1), "unknown");
  EXPECT_EQ(bytes_text(512), "512 B");
  EXPECT_EQ(bytes_text(1536), "1.5 KiB");
  EXPECT_EQ(bytes_text(int64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(bytes_text(int64_t{5} << 30), "5.00 GiB");
}

TEST(Strings, InvalidUtf8IsFoundAndEscaped) {
  EXPECT_EQ(invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(invalid_utf8("r\xc3\xa9sum\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(invalid_utf8("caf\xe9"), 3u);           // Latin-1, not UTF-8
  EXPECT_EQ(invalid_utf8("ab\xc3"), 2u);            // cut short
  EXPECT_EQ(invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(invalid_utf8("x\xed\xa0\x80"), 1u);     // a UTF-16 surrogate
  EXPECT_EQ(invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(printable("/data/caf\xe9/x"), "/data/caf\\xe9/x");
  EXPECT_EQ(printable("tab\tbell\a\xc3\xa9"), "tab\\x09bell\\x07\xc3\xa9");
  EXPECT_EQ(printable(printable("\xff\x01")), printable("\xff\x01"));
}

TEST(Errors, ConfigErrorReadsLikeACompilerError) {
  const ConfigError error({"configs/a.yaml", 12, 15}, "data.batch_size", "must be >= 1 (got -4)");
  EXPECT_STREQ(error.what(), "configs/a.yaml:12:15: data.batch_size: must be >= 1 (got -4)");
  EXPECT_EQ(error.code(), ExitCode::kUserInput);
  // Keys and origins come from files and argv: any byte may be in them.
  EXPECT_STREQ(ConfigError({"caf\xe9.yaml", 1, 1}, "k\x1b", "unknown key").what(),
               "caf\\xe9.yaml:1:1: k\\x1b: unknown key");
}

TEST(Errors, ExitCodesByKind) {
  EXPECT_EQ(DataError("x").code(), ExitCode::kUserInput);
  EXPECT_EQ(CheckpointError("x").code(), ExitCode::kUserInput);
  EXPECT_EQ(DistributedError("x").code(), ExitCode::kRuntime);
  EXPECT_EQ(Interrupted("x").code(), ExitCode::kInterrupted);
}

TEST(Strings, CountOfSaysOneOrMany) {
  EXPECT_EQ(count_of(1, "epoch"), "1 epoch");
  EXPECT_EQ(count_of(0, "step"), "0 steps");
  EXPECT_EQ(count_of(3, "replica"), "3 replicas");
  EXPECT_EQ(count_of(2, "class"), "2 classes");
}

}  // namespace gputrain
