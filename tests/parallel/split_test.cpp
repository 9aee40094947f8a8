#include <gtest/gtest.h>

#include "gputrain/parallel/split.h"

namespace gputrain::parallel {
namespace {

std::vector<std::string> devices(int n) { return std::vector<std::string>(static_cast<std::size_t>(n), "cpu"); }

TEST(SplitBatch, SeedBatchOf30Over8) {
  EXPECT_EQ(chunk_sizes(split_batch(30, devices(8))), (std::vector<int64_t>{4, 4, 4, 4, 4, 4, 4, 2}));
}

TEST(SplitBatch, SeedLastBatchOf10ReachesOnlyFive) {
  EXPECT_EQ(chunk_sizes(split_batch(10, devices(8))), (std::vector<int64_t>{2, 2, 2, 2, 2}));
}

TEST(SplitBatch, EvenUnevenAndTiny) {
  EXPECT_EQ(chunk_sizes(split_batch(128, devices(4))), (std::vector<int64_t>{32, 32, 32, 32}));
  EXPECT_EQ(chunk_sizes(split_batch(5, devices(2))), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(chunk_sizes(split_batch(1, devices(4))), (std::vector<int64_t>{1}));
  EXPECT_EQ(chunk_sizes(split_batch(7, devices(1))), (std::vector<int64_t>{7}));
}

TEST(SplitBatch, RowsAreContiguousAndLogged) {
  const auto splits = split_batch(30, {"cuda:0", "cuda:1", "cuda:2"});
  ASSERT_EQ(splits.size(), 3u);
  EXPECT_EQ(splits[1].begin, 10);
  EXPECT_EQ(splits[1].end, 20);
  EXPECT_EQ(fmt::format("{}", splits[2]), "replica=2 device=cuda:2 rows=[20,30) n=10");
}

}  // namespace
}  // namespace gputrain::parallel
