// Per-rank timing: the spread over ranks, and the straggler rule (one rank's
// own work above the others' by more than 20% in 3 log intervals in a row).
#include "gputrain/train/rank_timing.h"

#include <gtest/gtest.h>

namespace gputrain::train {
namespace {

// Ranks in lockstep: each steps in 10 ms; `slow`'s own work takes `work_ms`, the others wait for it.
std::vector<RankFigures> lockstep(int ranks, int slow, double work_ms, double others_work_ms = 5) {
  std::vector<RankFigures> out;
  for (int r = 0; r < ranks; ++r) {
    const double work = (r == slow ? work_ms : others_work_ms) / 1000;
    out.push_back({0.010, 0.0005 * r, 0.010 - work});
  }
  return out;
}

TEST(RankTiming, SpreadOverTheRanksAndTheBusiestRank) {
  const RankTiming t = summarize(lockstep(4, 2, 8));
  EXPECT_EQ(t.ranks, 4);
  EXPECT_EQ(t.slowest, 2);
  EXPECT_DOUBLE_EQ(t.step_s.min, 0.010);
  EXPECT_DOUBLE_EQ(t.step_s.max, 0.010);
  EXPECT_DOUBLE_EQ(t.data_wait_s.max, 0.0015);
  EXPECT_NEAR(t.data_wait_s.mean, 0.00075, 1e-12);
  EXPECT_NEAR(t.collective_wait_s.min, 0.002, 1e-12);  // the straggler waits least
  EXPECT_NEAR(t.collective_wait_s.max, 0.005, 1e-12);
}

TEST(RankTiming, AStragglerIsNamedWithItsHostOnceAfterThreeIntervalsInARow) {
  StragglerWatch watch({"node-a", "node-a", "node-b"});
  EXPECT_FALSE(watch.observe(lockstep(3, 2, 7)));
  EXPECT_FALSE(watch.observe(lockstep(3, 2, 7)));
  const auto warning = watch.observe(lockstep(3, 2, 7));
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("rank 2 on host node-b is a straggler"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("1.40x the other ranks' mean (7.00 ms vs 5.00 ms)"), std::string::npos) << *warning;
  EXPECT_FALSE(watch.observe(lockstep(3, 2, 7))) << "once per run";
}

TEST(RankTiming, NoStragglerWhenTheSlowRankChangesOrTheGapIsSmall) {
  StragglerWatch watch({"a", "b"});
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(watch.observe(lockstep(2, i % 2, 7))) << "a different rank each time";
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(watch.observe(lockstep(2, 1, 5.9))) << "18% slower: within the margin";
  // 50% slower but by 0.1 ms a step: timer noise, not a straggler.
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(watch.observe(lockstep(2, 1, 0.15, 0.1)));
  EXPECT_FALSE(watch.observe(lockstep(2, 1, 7)));
  EXPECT_FALSE(watch.observe(lockstep(2, 0, 7))) << "the run of intervals starts again";
  EXPECT_FALSE(watch.observe(lockstep(2, 0, 7)));
  EXPECT_TRUE(watch.observe(lockstep(2, 0, 7)));
}

}  // namespace
}  // namespace gputrain::train
