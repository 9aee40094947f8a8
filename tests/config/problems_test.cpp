// A config with several problems reports them all at once, each where it was
// written; a key of another kind of data set is ignored with a warning.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include <string>

#include "gputrain/common/error.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"

namespace gputrain::config {
namespace {

TEST(ConfigProblems, EveryProblemIsReportedAtOnceWithItsPlace) {
  const std::string yaml =
      "data:\n  batch_size: 32\n  shufle: true\noptim:\n  momentum: 2\n  scheduler: sometimes\nmodel: [mlp]\n";
  try {
    load_config_text(yaml, "exp.yaml", {"optim.lr=-1", "train.accumulation_steps=3"});
    FAIL() << "accepted";
  } catch (const ConfigErrors& e) {
    std::vector<std::string> lines;
    for (const ConfigError& one : e.all()) lines.emplace_back(one.what());
    const std::vector<std::string> expected{
        "exp.yaml:3:3: data.shufle: unknown key; did you mean 'shuffle'?",
        "exp.yaml:7:8: model: expected a mapping of keys, got a list",
        "--set #1 (optim.lr=-1): optim.lr: must be > 0 (got -1)",
        "exp.yaml:5:13: optim.momentum: must be in [0, 1) (got 2)",
        "exp.yaml:6:14: optim.scheduler: unknown value 'sometimes'",
        "exp.yaml:2:15: data.batch_size: 32 is not divisible by train.accumulation_steps (3); batch_size is the "
        "batch per optimizer step and each micro-batch takes an equal share",
    };
    ASSERT_EQ(lines.size(), expected.size()) << e.what();
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].substr(0, expected[i].size()), expected[i]) << e.what();
    }
    EXPECT_EQ(e.where().str(), "exp.yaml:3:3");
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
  }
}

TEST(ConfigProblems, AKeyAtFaultIsNotBlamedAgainByTheChecksOnIt) {
  // batch_size 'many' keeps its default, about which the divisibility check would mislead.
  try {
    load_config_text("data: {batch_size: many}\ntrain: {accumulation_steps: 0}\n", "exp.yaml");
    FAIL() << "accepted";
  } catch (const ConfigErrors& e) {
    ASSERT_EQ(e.all().size(), 2u) << e.what();
    EXPECT_EQ(e.all()[0].key(), "data.batch_size");
    EXPECT_EQ(e.all()[1].key(), "train.accumulation_steps");
  }
}

TEST(ConfigProblems, OneProblemIsThrownAsItIs) {
  try {
    load_config_text("optim: {lr: 0}\n", "exp.yaml");
    FAIL() << "accepted";
  } catch (const ConfigErrors&) {
    FAIL() << "one problem came as a list";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "exp.yaml:1:13: optim.lr: must be > 0 (got 0)");
  }
}

// The log lines that loading `yaml` with `overrides` writes.
std::string log_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  load_config_text(yaml, "exp.yaml", overrides);
  spdlog::set_default_logger(previous);
  return log.str();
}

TEST(ConfigProblems, AKeyOfAnotherKindOfDataSetIsIgnoredWithAWarning) {
  EXPECT_NE(log_of("data:\n  dataset: npy\n  root: arrays\n  cache: memory\n")
                .find("exp.yaml:4:10: data.cache: only data.dataset: image_folder reads it; npy ignores it"),
            std::string::npos);
  EXPECT_NE(log_of("data: {dataset: synthetic, samples: 64}\n", {"data.dataset=npy"})
                .find("exp.yaml:1:37: data.samples: only data.dataset: synthetic reads it; npy ignores it"),
            std::string::npos);
  // Each kind's own keys, and a dumped config's (every key, the others at their defaults), say nothing.
  const auto loaded = load_config_text("data: {dataset: synthetic, samples: 10, classes: 3}\n", "exp.yaml");
  EXPECT_EQ(log_of("data: {dataset: synthetic, samples: 10, classes: 3}\n"), "");
  EXPECT_EQ(log_of(dump_config(loaded.config)), "");
}

// Issue 56 #2: `gputrain plan` lists the config's problems and goes on with
// what is left, so the config it goes on with must break no rule.
TEST(ConfigProblems, CollectedProblemsLeaveAConfigThatBreaksNoRule) {
  std::vector<ConfigError> problems;
  const LoadedConfig loaded = load_config_text("data: {batch_size: 128, root: /nonexistent}\noptim: {lr: -1}\n",
                                               "exp.yaml", {"train.accumulation_steps=3"}, &problems);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].key(), "optim.lr");
  EXPECT_EQ(problems[1].key(), "data.batch_size");
  EXPECT_NE(std::string(problems[1].what()).find("exp.yaml:1:20: data.batch_size: 128 is not divisible"),
            std::string::npos)
      << problems[1].what();
  // The refused value keeps its default; of the keys the rule reads, the one whose default makes it hold
  // (train.accumulation_steps) falls back; every other key stays as written.
  EXPECT_GT(loaded.config.optim.lr, 0);
  EXPECT_EQ(loaded.config.data.batch_size, 128);
  EXPECT_EQ(loaded.config.train.accumulation_steps, 1);
  EXPECT_EQ(loaded.config.data.root, "/nonexistent");
  EXPECT_NO_THROW(load_config_text(dump_config(loaded.config), "fallback.yaml"));
}

TEST(ConfigProblems, ACleanConfigCollectsNothing) {
  std::vector<ConfigError> problems;
  const LoadedConfig loaded = load_config_text("data: {batch_size: 96}\n", "exp.yaml", {}, &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(loaded.config.data.batch_size, 96);
}

}  // namespace
}  // namespace gputrain::config
