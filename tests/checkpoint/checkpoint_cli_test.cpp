// Checkpoints through the real binary: signals, a kill in the middle of a
// write, a damaged file, a mismatched config, and export read by Python.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/data/generate.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::GputrainProcess;
using testing::has_temporary;
using testing::run_gputrain;
using testing::TempDir;
using testing::wait_until;

// The complete lines of metrics.jsonl so far, parsed.
std::vector<nlohmann::json> metrics(const fs::path& run) {
  std::vector<nlohmann::json> out;
  std::istringstream text(testing::read_text(run / "metrics.jsonl"));
  std::string line;
  while (std::getline(text, line)) {
    if (!text.eof()) out.push_back(nlohmann::json::parse(line));  // the last may be half-written
  }
  return out;
}

// Every child runs its tiny ops on one thread: OpenMP's spinning workers
// slow them tenfold on a busy machine.
const std::map<std::string, std::string> kEnv{{"OMP_NUM_THREADS", "1"}};

// gputrain whose every checkpoint write pauses a minute half-way, logging
// "test hook: pausing" (paused_writes_main.cpp): a test can kill it mid-write.
GputrainProcess start_with_paused_writes(const std::vector<std::string>& args) {
  return GputrainProcess(args, kEnv, testing::kSourceDir, {}, testing::kPausedWritesBinary);
}

// A tiny synthetic run writing to a temporary directory.
class CheckpointCli : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::write_text(dir_ / "run.yaml", R"(
name: cli
seed: 2
device: cpu
data: {dataset: synthetic, samples: 256, test_samples: 64, features: 6, classes: 3, batch_size: 32, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [16]}
optim: {name: sgd, lr: 0.05, momentum: 0.9}
train: {epochs: 1, log_every: 1}
output: {dir: )" + dir_.path().string() + "}\n");
  }

  // `train --config run.yaml --set ...`, and `--resume` when given.
  std::vector<std::string> train(const std::vector<std::string>& sets, const std::string& resume = "") const {
    std::vector<std::string> args{"train", "--config", config_.string()};
    for (const auto& set : sets) {
      args.push_back("--set");
      args.push_back(set);
    }
    if (!resume.empty()) args.insert(args.end(), {"--resume", resume});
    return args;
  }
  fs::path run() const { return dir_ / "cli"; }
  fs::path checkpoints() const { return run() / "checkpoints"; }

  TempDir dir_;
  fs::path config_;
};

TEST_F(CheckpointCli, SigintFinishesTheStepWritesACheckpointAndExits130) {
  GputrainProcess child(train({"train.epochs=1000000", "checkpoint.every=0"}), kEnv);
  ASSERT_TRUE(wait_until([&] { return !metrics(run()).empty(); })) << child.err_so_far();
  child.send(SIGINT);
  const auto r = child.wait();
  ASSERT_EQ(r.exit_code, 130) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_TRUE(summary["stopped"].get<bool>());
  const std::string path = summary["checkpoint"];
  const auto listed = list_checkpoints(checkpoints());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed.front().string(), path);
  EXPECT_EQ(Checkpoint::read(path).state().position.step, summary["steps"].get<int64_t>());
  EXPECT_NE(r.err.find("stopped by SIGINT"), std::string::npos) << r.err;
  const auto test = run_gputrain({"test", "--config", config_.string(), "--checkpoint", path}, kEnv);
  EXPECT_EQ(test.exit_code, 0) << test.err;
  EXPECT_NE(test.out.find("Test set: Average loss"), std::string::npos);
  // A checkpoint holds its config: --config is optional, and gives the same line (to the bit: the same binary,
  // weights and environment).
  const auto alone = run_gputrain({"test", "--checkpoint", path}, kEnv);
  EXPECT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(alone.out, test.out);
  // model.pt holds weights only: without --config that is a user error saying what to give.
  const auto zip = testing::write_text(dir_ / "model.pt", std::string("PK\x03\x04 weights", 13));
  const auto weights_only = run_gputrain({"test", "--checkpoint", zip.string()}, kEnv);
  EXPECT_EQ(weights_only.exit_code, 2);
  EXPECT_NE(weights_only.err.find("holds weights only, not the config they were trained with: give --config"),
            std::string::npos)
      << weights_only.err;
  // Neither a checkpoint nor weights: said so, not called weights.
  const auto text = testing::write_text(dir_ / "notes.txt", "epochs: 3\n");
  const auto foreign = run_gputrain({"predict", "--checkpoint", text.string(), "--input", text.string()}, kEnv);
  EXPECT_EQ(foreign.exit_code, 2);
  EXPECT_NE(foreign.err.find("not a gputrain checkpoint (it starts with 'epochs: '"), std::string::npos) << foreign.err;
  EXPECT_EQ(foreign.err.find("holds weights only"), std::string::npos) << foreign.err;
}

TEST_F(CheckpointCli, SighupWritesACheckpointAndTrainingGoesOn) {
  GputrainProcess child(train({"train.epochs=1000000", "checkpoint.every=0", "train.on_sigint=stop"}), kEnv);
  ASSERT_TRUE(wait_until([&] { return !metrics(run()).empty(); })) << child.err_so_far();
  child.send(SIGHUP);
  ASSERT_TRUE(wait_until([&] { return fs::exists(checkpoints()) && !list_checkpoints(checkpoints()).empty(); }))
      << child.err_so_far();
  const int64_t at = Checkpoint::read(list_checkpoints(checkpoints()).front()).state().position.step;
  ASSERT_TRUE(wait_until([&] {
    const auto m = metrics(run());
    return m.back()["step"].get<int64_t>() > at + 2;  // not empty: it was before the signal
  })) << child.err_so_far();
  child.send(SIGINT);  // on_sigint: stop writes nothing more
  const auto r = child.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(list_checkpoints(checkpoints()).size(), 1u);
}

TEST_F(CheckpointCli, KillDuringACheckpointWriteLeavesThePreviousOneToResume) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);  // epoch 1's checkpoint
  const fs::path first = list_checkpoints(checkpoints()).back();
  const std::string good = testing::read_text(first);
  {
    GputrainProcess child = start_with_paused_writes(train({"train.epochs=2"}, "auto"));
    ASSERT_TRUE(wait_until([&] { return child.err_so_far().find("test hook: pausing") != std::string::npos; }))
        << child.err_so_far();
    child.send(SIGKILL);
    EXPECT_EQ(child.wait().exit_code, 128 + SIGKILL);
  }
  EXPECT_TRUE(has_temporary(checkpoints()));
  EXPECT_EQ(list_checkpoints(checkpoints()), std::vector<fs::path>{first});
  EXPECT_EQ(testing::read_text(first), good);
  const auto r = run_gputrain(train({"train.epochs=2"}, "auto"), kEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("left by a checkpoint write that did not finish"), std::string::npos) << r.err;
  EXPECT_FALSE(has_temporary(checkpoints()));
  EXPECT_EQ(Checkpoint::read(list_checkpoints(checkpoints()).back()).state().position.epoch, 2);
  // metrics.jsonl holds each record once, as if the run had never stopped.
  std::set<std::string> seen;
  for (const auto& record : metrics(run())) {
    const std::string key = record["step"].dump() + " " + record["kind"].get<std::string>();
    EXPECT_TRUE(seen.insert(key).second) << "twice: " << record.dump();
  }
  EXPECT_EQ(seen.size(), 16u + 2u * 2u);  // 16 steps logged, 2 epochs of train and test records
}

TEST_F(CheckpointCli, ASecondSigintDuringTheWriteExitsAtOnceAndKeepsTheLastCheckpoint) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);  // epoch 1's checkpoint, at step 8
  const fs::path first = list_checkpoints(checkpoints()).back();
  const std::string good = testing::read_text(first);
  GputrainProcess child = start_with_paused_writes(train({"train.epochs=1000000", "checkpoint.every=0"}, "auto"));
  ASSERT_TRUE(wait_until([&] {
    const auto m = metrics(run());
    return !m.empty() && m.back()["step"].get<int64_t>() > 8;
  })) << child.err_so_far();
  child.send(SIGINT);  // finish the step, write a checkpoint: the hook pauses in the middle
  ASSERT_TRUE(wait_until([&] { return child.err_so_far().find("test hook: pausing") != std::string::npos; }))
      << child.err_so_far();
  child.send(SIGINT);
  const auto r = child.wait();
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_NE(r.err.find("second stop signal, exiting now"), std::string::npos) << r.err;
  EXPECT_EQ(list_checkpoints(checkpoints()), std::vector<fs::path>{first});
  EXPECT_EQ(testing::read_text(first), good);
}

// Each kind of damage has its unit test (format_test); here the exit code and
// the message as a user meets them.
TEST_F(CheckpointCli, DamagedOrMismatchedCheckpointsExitTwoNamingTheFile) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
  const std::string good = testing::read_text(list_checkpoints(checkpoints()).back());
  const auto truncated = testing::write_text(dir_ / "truncated.ckpt", good.substr(0, good.size() / 2));
  const auto cut = run_gputrain({"train", "--resume", truncated.string()}, kEnv);
  EXPECT_EQ(cut.exit_code, 2) << cut.err;
  EXPECT_NE(cut.err.find(truncated.string() + ": truncated"), std::string::npos) << cut.err;
  const auto mismatch = run_gputrain({"train", "--resume", list_checkpoints(checkpoints()).back().string(), "--set",
                                      "model.hidden=[7]", "--set", "train.epochs=2"},
                                     kEnv);
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_NE(mismatch.err.find("model.hidden is [16] in the checkpoint but [7] in --set #1"), std::string::npos)
      << mismatch.err;
  // auto passes over a damaged newest checkpoint, with a warning.
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  testing::write_text(checkpoints() / "ckpt-s00000099-e0009-b000000.ckpt", flipped);
  const auto r = run_gputrain(train({"train.epochs=2"}, "auto"), kEnv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(
      r.err.find("skipping a damaged checkpoint: " + (checkpoints() / "ckpt-s00000099-e0009-b000000.ckpt").string()),
      std::string::npos)
      << r.err;
}

TEST_F(CheckpointCli, ExportedWeightsLoadInPythonAndScoreTheSame) {
  const fs::path python = testing::venv_python();
  if (!fs::exists(python)) GTEST_SKIP() << "no Python with torch at " << python;
  const fs::path data = dir_ / "data";
  data::write_idx_set(data, {200, 60, 0}, /*gzip=*/false);
  ASSERT_EQ(run_gputrain(train({"data.dataset=fashion_mnist", "data.root=" + data.string(), "data.batch_size=20",
                                "train.epochs=2"}),
                         kEnv)
                .exit_code,
            0);
  const int64_t correct = metrics(run()).back()["correct"].get<int64_t>();
  const fs::path weights = dir_ / "weights.pt";
  const auto exported = run_gputrain(
      {"export", "--checkpoint", list_checkpoints(checkpoints()).back().string(), "--out", weights.string()}, kEnv);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  // The run's model.pt too, through torch.jit.load (gputrain writes that file itself). Python runs on two
  // threads, the run on one: another process and thread count, whose rounding may tip a tie (a test image
  // whose two largest logits are that close) to the other class, so the counts may differ by the ties.
  GputrainProcess python_check({std::string(testing::kSourceDir) + "/tests/checkpoint/export_check.py",
                                weights.string(), data.string(), (run() / "model.pt").string()},
                               {{"OMP_NUM_THREADS", "2"}}, dir_.path().string(), {}, python.string());
  const testing::ProcessResult checked = python_check.wait();
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  std::istringstream scores(checked.out);
  int64_t exported_correct = -1, exported_ties = -1, model_pt_correct = -1, model_pt_ties = -1;
  scores >> exported_correct >> exported_ties >> model_pt_correct >> model_pt_ties;
  ASSERT_GE(model_pt_ties, 0) << checked.out;
  EXPECT_LE(std::abs(exported_correct - correct), exported_ties) << exported_correct << " of 60 against " << correct;
  EXPECT_LE(std::abs(model_pt_correct - correct), model_pt_ties)  // model.pt holds the last epoch's weights
      << model_pt_correct << " of 60 against " << correct;
  EXPECT_GT(correct, 60 / 10);  // above chance, so the weights matter
}

// Issue 17 #17: SIGTERM before the first step exits 130 and says so. The
// config comes through a FIFO (as from `--config <(...)`): once this test's
// open for writing returns, the child is reading it, so it is in its setup.
TEST_F(CheckpointCli, SigtermDuringSetupExits130SayingTrainingHadNotStarted) {
  const fs::path fifo = dir_ / "config.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  GputrainProcess child({"train", "--config", fifo.string()}, kEnv);
  const int fd = ::open(fifo.c_str(), O_WRONLY);  // blocks until the child opens it
  ASSERT_GE(fd, 0);
  child.send(SIGTERM);
  const auto r = child.wait();
  ::close(fd);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("stopped by a signal before training started"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gputrain::checkpoint

namespace gputrain::checkpoint {
namespace {

// Issue 17 #1: a re-run that fails its checks leaves the finished run as it was.
TEST_F(CheckpointCli, AFailedRerunLeavesTheFinishedRunAsItWas) {
  const auto first = run_gputrain(train({}), kEnv);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("finished 1 epoch (8 steps)"), std::string::npos) << first.err;  // #25's wording
  const std::string config = testing::read_text(run() / "config.yaml");
  const std::string metrics_text = testing::read_text(run() / "metrics.jsonl");
  const auto before = list_checkpoints(checkpoints());
  // Caught only once the trainer is built: the accumulation does not divide the batch.
  const auto r = run_gputrain(train({"data.batch_size=30", "train.accumulation_steps=4"}), kEnv);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(testing::read_text(run() / "config.yaml"), config);
  EXPECT_EQ(testing::read_text(run() / "metrics.jsonl"), metrics_text);
  EXPECT_FALSE(fs::exists(run() / "metrics.1.jsonl"));
  EXPECT_FALSE(fs::exists(run() / "checkpoints.1"));
  EXPECT_EQ(list_checkpoints(checkpoints()), before);
}

// Issue 38 #4: a checkpoint holds the config as written and the batch
// data.batch_size: auto chose, so the run resumes from inside an epoch with its
// own config file, in that batch, without measuring again. (The checkpoint's
// config used to hold the chosen numbers, which the file's `auto` contradicted.)
TEST_F(CheckpointCli, AnAutoBatchRunResumesInsideAnEpochInTheBatchItChose) {
  const std::vector<std::string> sets{"data.batch_size=auto", "train.target_batch=32", "train.max_memory=64MiB",
                                      "checkpoint.every_steps=3", "checkpoint.keep=10"};
  const auto first = run_gputrain(train(sets), kEnv);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("data.batch_size: 32 (auto: micro-batch 32"), std::string::npos) << first.err;
  EXPECT_NE(testing::read_text(run() / "config.yaml").find("batch_size: 32"), std::string::npos)
      << "config.yaml repeats the run without measuring";
  const auto all = list_checkpoints(checkpoints());
  const auto inside = std::find_if(all.begin(), all.end(), [](const fs::path& p) {
    return p.filename().string().find("-b000000") == std::string::npos;  // micro-batches into an epoch
  });
  ASSERT_NE(inside, all.end());
  EXPECT_NE(Checkpoint::read(*inside).state().config.find("batch_size: auto"), std::string::npos);

  const auto resumed = run_gputrain(train(sets, inside->string()), kEnv);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("data.batch_size: 32 in 1 accumulation step (auto, as the checkpoint resolved it)"),
            std::string::npos)
      << resumed.err;
  EXPECT_EQ(resumed.err.find("(auto: micro-batch"), std::string::npos) << "measured again: " << resumed.err;
}

// Issue 17 #2: a directory that holds anything but checkpoints is never moved aside.
TEST_F(CheckpointCli, ACheckpointDirHoldingOtherFilesIsNotMovedAside) {
  testing::write_text(run() / "notes" / "todo.txt", "mine");
  const auto r = run_gputrain(train({"checkpoint.dir=notes"}), kEnv);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("holds 'todo.txt', which is not a gputrain checkpoint"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_text(run() / "notes" / "todo.txt"), "mine");
  EXPECT_FALSE(fs::exists(run() / "notes.1"));
  EXPECT_FALSE(fs::exists(run() / "config.yaml"));
  const auto outside = run_gputrain(train({"checkpoint.dir=../../x"}), kEnv);
  EXPECT_EQ(outside.exit_code, 2) << outside.err;
  EXPECT_NE(outside.err.find("checkpoint.dir: must be a directory inside the run directory"), std::string::npos)
      << outside.err;
  EXPECT_EQ(run_gputrain(train({"checkpoint.dir=/tmp"}), kEnv).exit_code, 2);
}

// Issue 17 #3: one process per run directory; a second run and a resume are refused.
TEST_F(CheckpointCli, ASecondRunOrResumeOfALiveRunIsRefusedNamingTheHoldersPid) {
  GputrainProcess live =
      start_with_paused_writes(train({"train.epochs=1000000", "checkpoint.every=0", "checkpoint.every_steps=1"}));
  ASSERT_TRUE(wait_until([&] { return live.err_so_far().find("test hook: pausing") != std::string::npos; }))
      << live.err_so_far();
  const std::string holder = "pid " + std::to_string(live.pid());
  const auto second = run_gputrain(train({}), kEnv);
  EXPECT_EQ(second.exit_code, 2) << second.err;
  EXPECT_NE(second.err.find(holder), std::string::npos) << second.err;
  const auto resumed = run_gputrain(train({}, "auto"), kEnv);
  EXPECT_EQ(resumed.exit_code, 2) << resumed.err;
  EXPECT_NE(resumed.err.find(holder), std::string::npos) << resumed.err;
  EXPECT_FALSE(fs::exists(run() / "checkpoints.1"));
  EXPECT_FALSE(fs::exists(run() / "metrics.1.jsonl"));
  live.send(SIGKILL);
  live.wait();
  // The kernel released the lock with the process.
  EXPECT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
}

// Issue 17 #4: export never replaces its own input, by any name.
// The explain line of `key` in `text`; "" when there is none.
std::string explain_line(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(key + " ", 0) == 0) return line;
  }
  return "";
}

// Issue 20 #3: where a resumed run's keys come from: the checkpoint, with --set on top.
TEST_F(CheckpointCli, ConfigExplainOfAResumeNamesTheCheckpoint) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
  const fs::path ckpt = list_checkpoints(checkpoints()).back();
  for (const std::vector<std::string>& resume :
       {std::vector<std::string>{"--resume", ckpt.string()},
        std::vector<std::string>{"--resume", "auto", "--config", config_.string()}}) {
    std::vector<std::string> args{"config", "--explain", "--set", "train.epochs=3"};
    args.insert(args.end(), resume.begin(), resume.end());
    const auto r = run_gputrain(args, kEnv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string lr = explain_line(r.out, "optim.lr");
    EXPECT_NE(lr.find(ckpt.filename().string()), std::string::npos) << r.out;
    EXPECT_NE(lr.find("(its config):"), std::string::npos) << lr;
    const std::string epochs = explain_line(r.out, "train.epochs");
    EXPECT_NE(epochs.find(" 3 "), std::string::npos) << epochs;
    EXPECT_NE(epochs.find("--set #1 (train.epochs=3)"), std::string::npos) << epochs;
  }
}

TEST_F(CheckpointCli, ExportOntoItsOwnCheckpointIsRefused) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
  const fs::path ckpt = list_checkpoints(checkpoints()).back();
  const std::string good = testing::read_text(ckpt);
  fs::create_symlink(ckpt, dir_ / "link.ckpt");
  fs::create_hard_link(ckpt, dir_ / "hard.ckpt");
  for (const fs::path& out : {ckpt, dir_ / "link.ckpt", dir_ / "hard.ckpt"}) {
    const auto r = run_gputrain({"export", "--checkpoint", ckpt.string(), "--out", out.string()}, kEnv);
    EXPECT_EQ(r.exit_code, 2) << out << r.err;
    EXPECT_NE(r.err.find("is the --checkpoint file itself"), std::string::npos) << r.err;
  }
  EXPECT_EQ(testing::read_text(ckpt), good);
  const auto ok = run_gputrain({"export", "--checkpoint", ckpt.string(), "--out", (dir_ / "w.pt").string()}, kEnv);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Issue 17 #14: a bad --out or a full disk is the user's to fix (exit 2), as
// for train, and leaves no partial file; a device is not replaced.
TEST_F(CheckpointCli, ExportToABadPathOrAFullDiskExitsTwoAndLeavesNothing) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
  const fs::path ckpt = list_checkpoints(checkpoints()).back();
  testing::write_text(dir_ / "file", "a regular file");
  for (const fs::path& out : {dir_ / "file" / "w.pt", fs::path("/dev/full"), dir_ / "absent" / "w.pt"}) {
    const auto r = run_gputrain({"export", "--checkpoint", ckpt.string(), "--out", out.string()}, kEnv);
    EXPECT_EQ(r.exit_code, 2) << out << r.err;
    EXPECT_NE(r.err.find(out.string() + ": "), std::string::npos) << r.err;
  }
  struct stat info {};
  ASSERT_EQ(::stat("/dev/full", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode)) << "/dev/full was replaced";

  const auto full = run_gputrain({"export", "--checkpoint", ckpt.string(), "--out", (dir_ / "w.pt").string()}, kEnv,
                                 testing::kSourceDir, testing::file_size_limit(200));
  if (full.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here";
  EXPECT_EQ(full.exit_code, 2) << full.err;
  EXPECT_NE(full.err.find("w.pt: cannot write: File too large"), std::string::npos) << full.err;
  EXPECT_FALSE(fs::exists(dir_ / "w.pt"));
  EXPECT_FALSE(has_temporary(dir_.path()));
}

// Issue 17 #5: an empty --resume is not "start afresh".
TEST_F(CheckpointCli, AnEmptyResumeIsRefused) {
  ASSERT_EQ(run_gputrain(train({}), kEnv).exit_code, 0);
  std::vector<std::string> args = train({});
  args.insert(args.end(), {"--resume", ""});
  const auto r = run_gputrain(args, kEnv);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume: the value is empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(run() / "checkpoints.1"));
}

}  // namespace
}  // namespace gputrain::checkpoint
