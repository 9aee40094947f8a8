// The CLI as a user meets it: the real binary in a child process.
#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

TEST(Cli, VersionNamesLibTorch) {
  const auto r = run_gputrain({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^gputrain \d+\.\d+\.\d+ \(LibTorch 2\.\d+\.\d+, )"))) << r.out;
}

TEST(Cli, HelpIsSuccessAndListsCommands) {
  const auto r = run_gputrain({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* command : {"config", "info"}) EXPECT_NE(r.out.find(command), std::string::npos) << command;
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run_gputrain({}).exit_code, 2);
  EXPECT_EQ(run_gputrain({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_gputrain({"info", "--bogus"}).exit_code, 2);
  EXPECT_EQ(run_gputrain({"config"}).exit_code, 2);  // --config is required
}

// A preemption notice that comes before gputrain's own code has run (here:
// held pending across exec) is answered once the handlers are in, before
// LibTorch's initialisers: exit 75 asks for a requeue, where the signal's
// default action (138) made a requeue script drop the job.
TEST(Cli, APreemptionNoticeBeforeAnythingLoadsExitsSeventyFive) {
  const ChildSetup pending_usr1 = [] {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, nullptr);
    raise(SIGUSR1);
  };
  const auto r = run_gputrain({"info"}, {}, testing::kSourceDir, pending_usr1);
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_NE(r.err.find("preempted (SIGUSR1) before training started"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "it stopped before the command ran";
}

TEST(Cli, InfoJsonParsesAndHonoursCudaVisibleDevices) {
  const auto r = run_gputrain({"info", "--json"}, {{"CUDA_VISIBLE_DEVICES", "1,0"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["cuda_visible_devices"], "1,0");
  EXPECT_EQ(json["libtorch_version"].get<std::string>().substr(0, 2), "2.");
  EXPECT_EQ(json["cuda_available"].get<bool>(), !json["gpus"].empty());
}

TEST(Cli, InfoWithoutGpuSaysSoAndSucceeds) {
  const auto r = run_gputrain({"info"}, {{"CUDA_VISIBLE_DEVICES", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CUDA available"), std::string::npos);
}

TEST(Cli, ConfigRoundTripThroughTheBinary) {
  TempDir dir;
  const auto first = run_gputrain({"config", "--config", "configs/cifar10.yaml", "--set", "train.epochs=2"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto resolved = write_text(dir / "resolved.yaml", first.out);
  const auto second = run_gputrain({"config", "--config", resolved.string()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_NE(first.out.find("epochs: 2"), std::string::npos);
}

TEST(Cli, BadConfigExitsTwoWithOneCleanMessage) {
  TempDir dir;
  const auto path = write_text(dir / "bad.yaml", "data:\n  batch_size: 0\n");
  const auto r = run_gputrain({"config", "--config", path.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path.string() + ":2:15: data.batch_size: must be >= 1 (got 0)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos);
  EXPECT_TRUE(r.out.empty());
}

TEST(Cli, MissingConfigFileExitsTwo) {
  const auto r = run_gputrain({"config", "--config", "/nonexistent.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot open the experiment file"), std::string::npos) << r.err;
}

TEST(Cli, BadSetExitsTwo) {
  const auto r = run_gputrain({"config", "--config", "configs/cifar10.yaml", "--set", "train.epoch=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--set #1 (train.epoch=3): train.epoch: unknown key; did you mean 'epochs'?"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace gputrain::testing
