// The sweep's seeds, combinations and summary figures.
#include "gputrain/report/sweep.h"

#include <gtest/gtest.h>

#include "gputrain/common/error.h"

namespace gputrain::report {
namespace {

TEST(SweepSeeds, RangesAndListsAndNothingElse) {
  EXPECT_EQ(parse_seeds("0..4"), (std::vector<uint64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(parse_seeds("7"), (std::vector<uint64_t>{7}));
  EXPECT_EQ(parse_seeds("3, 1,9"), (std::vector<uint64_t>{3, 1, 9}));
  for (const char* bad : {"", "4..0", "0..", "a", "1,,2", "-1", "0..5000"}) {
    EXPECT_THROW(parse_seeds(bad), UserError) << bad;
  }
}

TEST(SweepPoints, EveryValueCombinationWithEverySeedSeedsFastest) {
  const auto points = sweep_points({0, 1}, {"optim.lr=0.1,0.2", "train.epochs=3"});
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].index, 1);
  EXPECT_EQ(points[1].seed, 1u);
  EXPECT_EQ(points[1].settings, (std::vector<std::string>{"optim.lr=0.1", "train.epochs=3"}));
  EXPECT_EQ(points[2].settings, (std::vector<std::string>{"optim.lr=0.2", "train.epochs=3"}));
  EXPECT_EQ(sweep_points({5}, {}).size(), 1u);
  EXPECT_THROW(sweep_points({0}, {"optim.lr"}), UserError);
  EXPECT_THROW(sweep_points({0}, {"=1,2"}), UserError);
}

// The message of the UserError sweep_points raises.
std::string refusal(const std::vector<uint64_t>& seeds, const std::vector<std::string>& vary) {
  try {
    sweep_points(seeds, vary);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(SweepPoints, RefusesAKeyTwiceTheKeysItSetsAndTooManyRuns) {
  EXPECT_EQ(refusal({0}, {"optim.lr=0.1", "optim.lr=0.2,0.3"}),
            "--vary optim.lr=0.2,0.3: optim.lr is varied twice; give all its values in one --vary optim.lr=V1,V2,...");
  EXPECT_EQ(refusal({0, 1}, {"seed=3,4"}),
            "--vary seed=3,4: the sweep sets seed for each run; give the seeds with --seeds");
  EXPECT_NE(refusal({0}, {"name=a,b"}).find("the sweep sets name for each run"), std::string::npos);
  const std::string ten = "0,1,2,3,4,5,6,7,8,9";
  EXPECT_EQ(sweep_points({0}, {"a=" + ten, "b=" + ten, "c=" + ten}).size(), 1000u);
  EXPECT_EQ(refusal({0, 1}, {"a=" + ten, "b=" + ten, "c=" + ten}),
            "--vary c=0,1,2,3,4,5,6,7,8,9: the sweep would make more than 1000 runs (1000 value combinations x 2 "
            "seeds); vary fewer values or split the sweep");
  EXPECT_NE(refusal(std::vector<uint64_t>(1001, 0), {}).find("more than the 1000 runs"), std::string::npos);
}

TEST(SweepSummary, MeanAndSampleStandardDeviation) {
  EXPECT_FALSE(spread({}).has_value());
  EXPECT_DOUBLE_EQ(spread({3.0})->std, 0.0);
  const Spread s = *spread({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_NEAR(s.std, 2.138089935, 1e-9);  // sqrt(32 / 7)
}

TEST(SweepSummary, TheTableCountsOnlyRunsThatHaveEachFigure) {
  std::vector<SweepRun> runs(3);
  runs[0].result = {{"test_accuracy", 0.93}, {"elapsed_s", 10.0}, {"target_accuracy", 0.93}, {"time_to_target_s", 8.0}};
  runs[1].result = {
      {"test_accuracy", 0.92}, {"elapsed_s", 12.0}, {"target_accuracy", 0.93}, {"time_to_target_s", nullptr}};
  runs[2].exit_code = 1;
  for (int i = 0; i < 3; ++i) runs[i].point = {i + 1, static_cast<uint64_t>(i), {}};
  const std::string table = format_sweep(runs);
  EXPECT_NE(table.find("test accuracy: 92.50 ± 0.71% (n=2)"), std::string::npos) << table;
  EXPECT_NE(table.find("target reached in 1 of 3 runs; time to target: 8.00 ± 0.00 s (n=1)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("failed (exit 1)"), std::string::npos) << table;
  EXPECT_EQ(sweep_json(runs)["summary"]["test_accuracy"]["n"], 2);
}

}  // namespace
}  // namespace gputrain::report
