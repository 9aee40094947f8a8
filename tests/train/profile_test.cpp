// train.profile: LibTorch's profiler over the steps asked, a valid Chrome trace, and results unchanged.
#include "gputrain/train/profile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "gputrain/plan/run_plan.h"
#include "gputrain/train/trainer.h"
#include "support/temp_dir.h"
#include "train/synthetic_run.h"

namespace gputrain::train {
namespace {

// Every loss the run reports: each log interval's and each epoch's.
struct Losses : TrainObserver {
  std::vector<double> all;
  void on_step(const StepMetrics& m) override { all.push_back(m.loss); }
  void on_epoch(const EpochMetrics& m) override { all.push_back(m.train.mean_loss()); }
};

TEST(TrainProfile, RecordsTheStepsAskedAsAChromeTraceAndChangesNoResult) {
  testing::TempDir dir;
  Losses plain;
  Trainer(plan::resolve_run(synthetic_run({"train.epochs=2"}), cpu(), {})).fit(plain);
  Losses profiled;
  FitOptions options;
  options.profile_dir = dir.path();
  // 8 steps an epoch: epoch 2's first 3 are steps 9, 10 and 11.
  Trainer(plan::resolve_run(synthetic_run({"train.epochs=2", "train.profile={epoch: 2, steps: 3}"}), cpu(), {}))
      .fit(profiled, options);
  // One process, one config, one thread count: the profiler only watches, so every loss is the same.
  ASSERT_EQ(profiled.all.size(), plain.all.size());
  for (std::size_t i = 0; i < plain.all.size(); ++i) EXPECT_DOUBLE_EQ(profiled.all[i], plain.all[i]) << i;

  std::ifstream in(dir / "profile_trace.json");
  ASSERT_TRUE(in) << "no trace";
  const nlohmann::json trace = nlohmann::json::parse(in);  // throws, failing the test, unless valid JSON
  std::vector<std::string> steps;
  double first = 0;
  double last_end = 0;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    const std::string name = event.value("name", "");
    if (name.rfind(kStepMark, 0) != 0) continue;
    steps.push_back(name);
    if (steps.size() == 1) first = event.at("ts").get<double>();
    last_end = event.at("ts").get<double>() + event.at("dur").get<double>();
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"}));
  // The steps' operators: the MLP's matrix products among them, inside the steps' spans.
  int products = 0;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.value("cat", "") != "cpu_op" || event.value("name", "") != "aten::addmm") continue;
    ++products;
    EXPECT_GE(event.at("ts").get<double>(), first);
    EXPECT_LE(event.at("ts").get<double>(), last_end);
  }
  EXPECT_GE(products, 3 * 2) << "two linear layers' forward products in each of 3 steps";

  const std::optional<ProfileSummary> summary = read_profile_summary(dir / "profile.json");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->steps, 3);
  EXPECT_EQ(summary->trace, dir / "profile_trace.json");
  ASSERT_FALSE(summary->top.empty());
  for (std::size_t i = 1; i < summary->top.size(); ++i) EXPECT_GE(summary->top[i - 1].self_ms, summary->top[i].self_ms);
  for (const OperatorTime& op : summary->top) {
    EXPECT_EQ(op.name.rfind(kStepMark, 0), std::string::npos) << "a step mark is not an operator";
    EXPECT_LE(op.self_ms, op.total_ms + 1e-9);
  }
  EXPECT_NE(top_operators_table(*summary).find("aten::"), std::string::npos) << top_operators_table(*summary);
}

TEST(TrainProfile, AnEpochShorterThanTheStepsEndsTheRecording) {
  testing::TempDir dir;
  FitOptions options;
  options.profile_dir = dir.path();
  Losses losses;
  Trainer(plan::resolve_run(synthetic_run({"train.epochs=2", "train.profile={epoch: 1, steps: 50}"}), cpu(), {}))
      .fit(losses, options);
  const std::optional<ProfileSummary> summary = read_profile_summary(dir / "profile.json");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ(summary->steps, 8);  // the epoch's 8
}

}  // namespace
}  // namespace gputrain::train
