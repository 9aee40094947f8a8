// Issue 62 #5: what a command prints on standard output is checked. With
// stdout on a full disk (/dev/full) every command that prints its product
// there exits 2 naming the cause, as --out on that disk does, instead of 0
// with its output lost.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

// Standard output on /dev/full, where every write fails with ENOSPC.
void stdout_on_full_disk() {
  const int full = ::open("/dev/full", O_WRONLY);
  if (full < 0 || ::dup2(full, STDOUT_FILENO) < 0) std::_Exit(kSetupFailed);
}

void expect_refused(const std::vector<std::string>& args) {
  const ProcessResult r = run_gputrain(args, {}, kSourceDir, stdout_on_full_disk);
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "no /dev/full";
  EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
  EXPECT_NE(r.err.find("standard output: cannot write (No space left on device); what the command printed is "
                       "incomplete"),
            std::string::npos)
      << args[0] << ": " << r.err;
}

TEST(StandardOutput, AFullDiskFailsEveryCommandThatPrintsItsProduct) {
  TempDir dir;
  const std::string seed = "configs/seed_mlp.yaml", runs = "output.dir=" + (dir / "runs").string();
  expect_refused({"config", "--config", seed});
  expect_refused({"model", "--config", seed});
  expect_refused({"plan", "--config", seed, "--set", "device=cpu", "--set", runs});
  expect_refused({"info"});

  const std::string config = write_text(dir / "t.yaml", R"(
name: t
device: cpu
data: {dataset: synthetic, samples: 32, test_samples: 16, features: 4, classes: 2, batch_size: 16, num_workers: 0}
model: {name: mlp, hidden: [8]}
optim: {name: sgd, lr: 0.1}
train: {epochs: 1, tensorboard: false}
)")
                                 .string();
  expect_refused({"train", "--config", config, "--set", runs});  // its summary line
  const std::string checkpoint = (dir / "runs" / "t" / "checkpoints" / "best.ckpt").string();
  ASSERT_TRUE(std::filesystem::exists(checkpoint)) << "the run itself finished";
  expect_refused({"test", "--checkpoint", checkpoint});
  const std::string inputs = (dir / "x").string();
  ASSERT_EQ(run_gputrain({"datasets", "export", "--config", config, "--out", inputs}).exit_code, 0);
  expect_refused({"predict", "--checkpoint", checkpoint, "--input", inputs + "/test_inputs.npy"});
  expect_refused({"sweep", "--config", config, "--set", runs, "--set", "name=s", "--seeds", "0"});  // its table

  // The same commands with a working stdout exit 0: the check refuses only what failed.
  EXPECT_EQ(run_gputrain({"config", "--config", seed}).exit_code, 0);
}

}  // namespace
}  // namespace gputrain::testing
