// Hostile conditions met through the real binary: a full disk while training,
// paths that are not UTF-8, configs that are not experiment files. Each must
// end in one clean message and lose nothing an earlier run saved.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "gputrain/common/files.h"
#include "gputrain/data/export.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

namespace fs = std::filesystem;

// Every line of a metrics file parses as JSON (no half-written record); returns how many.
std::size_t whole_json_lines(const fs::path& path) {
  const std::string text = read_text(path);
  EXPECT_TRUE(text.empty() || text.back() == '\n') << "last line is cut short";
  std::size_t lines = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << "not JSON: " << line;
  }
  return lines;
}

// seed_mlp.yaml on the CPU, quietly, into `out`.
std::vector<std::string> train_args(const fs::path& out, std::vector<std::string> sets) {
  std::vector<std::string> args{"--log-level", "warn",  "train",      "--config", "configs/seed_mlp.yaml", "--output",
                                out.string(),  "--set", "device=cpu", "--set",    "train.epochs=1"};
  for (auto& set : sets) {
    args.push_back("--set");
    args.push_back(std::move(set));
  }
  return args;
}

void skip_unless_set_up(const ProcessResult& r) {
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here (setrlimit refused)";
}

TEST(CliFullDisk, MetricsStopAtTheLastWholeLineAndEarlierFilesSurvive) {
  TempDir dir;
  const auto first = run_gputrain(train_args(dir.path(), {}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path run = dir / "seed-mlp";
  const std::string metrics = read_text(run / "metrics.jsonl");
  // An earlier run that did not finish (a finished one, with its model.pt, is
  // not replaced by a fresh run at all: AFreshRunNeverReplacesAFinishedOne).
  fs::remove(run / "model.pt");

  // 4 KiB holds config.yaml and the warnings, but not a metrics line per step.
  const auto r =
      run_gputrain(train_args(dir.path(), {"train.log_every=1"}), {}, testing::kSourceDir, file_size_limit(4096));
  skip_unless_set_up(r);
  EXPECT_EQ(r.exit_code, 2) << r.err;  // a full disk is the user's to fix (issue 17 #14)
  EXPECT_NE(r.err.find("metrics.jsonl: cannot write metrics: File too large"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  EXPECT_GT(whole_json_lines(run / "metrics.jsonl"), 0u);
  EXPECT_EQ(read_text(run / "metrics.1.jsonl"), metrics);  // the first run's, kept aside
}

// A checkpoint that does not fit ended the run naming the file alone: it says
// how the run goes on, from the last checkpoint written (here the first epoch's).
TEST(CliFullDisk, ACheckpointThatDoesNotFitSaysHowTheRunGoesOn) {
  TempDir dir;
  const auto first = run_gputrain(train_args(dir.path(), {}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The run continued for another epoch under a 20,000-byte file limit: its checkpoint (31 KB) does not fit.
  std::vector<std::string> resumed = train_args(dir.path(), {"train.epochs=2"});
  resumed.insert(resumed.end(), {"--resume", "auto"});
  const auto r = run_gputrain(resumed, {}, testing::kSourceDir, file_size_limit(20000));
  skip_unless_set_up(r);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const fs::path checkpoints = dir / "seed-mlp" / "checkpoints";
  EXPECT_NE(r.err.find(": cannot write: File too large; the previous file, if any, is unchanged; the run stops here: "
                       "make room (or fix the cause), then continue it with --resume auto, from " +
                       (checkpoints / "ckpt-s00000032-e0001-b000000.ckpt").string()),
            std::string::npos)
      << r.err;
}

TEST(CliFullDisk, WeightsThatDoNotFitLeaveThePreviousOnesInPlace) {
  TempDir dir;
  // A model of about 280 KB, so that its weights are what overflows 64 KiB
  // (the checkpoint the first run leaves to resume from overflows it too:
  // the resumed run writes none).
  const std::vector<std::string> wide{"model.hidden=[256, 256]"};
  const auto first = run_gputrain(train_args(dir.path(), wide));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const fs::path run = dir / "seed-mlp";
  const std::string weights = read_text(run / "model.pt");
  ASSERT_GT(weights.size(), 200000u);
  const std::size_t first_records = whole_json_lines(run / "metrics.jsonl");

  // The finished run continued for another epoch: its new weights do not fit.
  std::vector<std::string> resumed =
      train_args(dir.path(), {"model.hidden=[256, 256]", "train.epochs=2", "checkpoint.every=0"});
  resumed.insert(resumed.end(), {"--resume", "auto"});
  const auto r = run_gputrain(resumed, {}, testing::kSourceDir, file_size_limit(65536));
  skip_unless_set_up(r);
  EXPECT_EQ(r.exit_code, 2) << r.err;  // a full disk is the user's to fix (issue 17 #14)
  EXPECT_NE(r.err.find("model.pt: cannot write: File too large; the previous file, if any, is unchanged"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_text(run / "model.pt"), weights);
  for (const auto& entry : fs::directory_iterator(run)) {
    EXPECT_EQ(entry.path().filename().string().find(kAtomicTemporaryMark), std::string::npos) << entry.path();
  }
  // Every record of the second epoch made it, as whole lines, after the first's.
  EXPECT_GT(whole_json_lines(run / "metrics.jsonl"), first_records);
}

// Issue 17 #19: a log file that cannot grow (the disk is full when a re-run
// appends to train.log) is said once, in our words, and not by spdlog's
// "*** LOG ERROR ***" banner on every line.
TEST(CliFullDisk, ALogFileThatCannotGrowIsSaidOnceWithoutSpdlogsBanner) {
  TempDir dir;
  ASSERT_EQ(run_gputrain(train_args(dir.path(), {})).exit_code, 0);
  const fs::path log = dir / "seed-mlp" / "train.log";
  fs::resize_file(log, 8192);                 // as large as a file may grow below
  fs::remove(dir / "seed-mlp" / "model.pt");  // an earlier run that did not finish: a finished one is not replaced
  std::vector<std::string> args = train_args(dir.path(), {});
  args.erase(args.begin(), args.begin() + 2);  // info lines, so that the log is written to
  const auto r = run_gputrain(args, {}, testing::kSourceDir, file_size_limit(8192));
  skip_unless_set_up(r);
  EXPECT_EQ(r.exit_code, 2) << r.err;  // model.pt (10 KB) does not fit either
  EXPECT_EQ(r.err.find("LOG ERROR"), std::string::npos) << r.err;
  const std::string said = "gputrain: cannot write the log file " + log.string() + " (";
  const std::size_t first = r.err.find(said);
  EXPECT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said, first + 1), std::string::npos) << "said more than once: " << r.err;
  EXPECT_NE(r.err.find("File too large); the log continues on stderr only"), std::string::npos) << r.err;
}

// Issue 37 #5: a fresh run in a finished run's directory is refused before it
// touches anything there (it used to replace config.yaml, report.html and
// run.json and move the checkpoints aside, and a runtime failure then left the
// run damaged); --resume continues it.
TEST(CliRerun, AFreshRunNeverReplacesAFinishedOne) {
  TempDir dir;
  ASSERT_EQ(run_gputrain(train_args(dir.path(), {})).exit_code, 0);
  const fs::path run = dir / "seed-mlp";
  // The files of the run; the log and the lock (which holds the pid of its holder) may change.
  const auto run_files = [&] {
    std::map<fs::path, std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(run)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && name != "train.log" && name != ".gputrain.lock") {
        files[entry.path()] = read_text(entry.path());
      }
    }
    return files;
  };
  const std::map<fs::path, std::string> before = run_files();
  ASSERT_TRUE(before.count(run / "report.html") && before.count(run / "run.json")) << "the run's files";
  // A re-run with another setting is refused up front, before anything could fail at runtime.
  const auto r = run_gputrain(train_args(dir.path(), {"optim.lr=0.5"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(run.string() + ": holds a finished run (its model.pt)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--resume auto"), std::string::npos) << r.err;
  EXPECT_TRUE(run_files() == before) << "the finished run's files changed";
  std::vector<std::string> resumed = train_args(dir.path(), {"train.epochs=2"});
  resumed.insert(resumed.end(), {"--resume", "auto"});
  const auto continued = run_gputrain(resumed);
  EXPECT_EQ(continued.exit_code, 0) << continued.err;
}

// Issue 37 #3, #4: an empty split, or a test split that does not fit the
// training split, is an exit-2 error naming the file(s) when the data loads,
// for every command that loads it (data.batch_size: auto and bench used to
// crash in the step-memory probe; train failed mid-epoch with LibTorch's error).
TEST(CliBadData, AnEmptySplitOrSplitsThatDisagreeExitTwoNamingTheFiles) {
  TempDir dir;
  const auto arrays = [&](const std::string& name, const torch::Tensor& train_inputs,
                          const torch::Tensor& test_inputs) {
    const fs::path root = dir / name;
    fs::create_directories(root);
    data::write_npy(root / "train_inputs.npy", train_inputs);
    data::write_npy(root / "train_targets.npy", torch::zeros({train_inputs.size(0)}, torch::kInt64));
    data::write_npy(root / "test_inputs.npy", test_inputs);
    data::write_npy(root / "test_targets.npy", torch::zeros({test_inputs.size(0)}, torch::kInt64));
    return std::vector<std::string>{"data.dataset=npy", "data.root=" + root.string()};
  };
  const auto empty_train = arrays("empty", torch::zeros({0, 20}), torch::zeros({4, 20}));
  const auto empty_test = arrays("empty_test", torch::zeros({8, 20}), torch::zeros({0, 20}));
  const auto wider_test = arrays("wider", torch::zeros({8, 20}), torch::zeros({4, 21}));
  const auto with = [](std::vector<std::string> sets, const std::string& more) {
    sets.push_back(more);
    return sets;
  };
  const std::string empty_file = (dir / "empty" / "train_inputs.npy").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {train_args(dir / "runs", empty_train), empty_file + ": holds no samples"},
      {train_args(dir / "runs", with(with(empty_train, "data.batch_size=auto"), "train.target_batch=4")),
       empty_file + ": holds no samples"},
      {{"bench", "--config", "configs/seed_mlp.yaml", "--set", "device=cpu", "--set", empty_train[0], "--set",
        empty_train[1]},
       empty_file + ": holds no samples"},
      {train_args(dir / "runs", empty_test), (dir / "empty_test" / "test_inputs.npy").string() + ": holds no samples"},
      {train_args(dir / "runs", wider_test),
       (dir / "wider" / "train_inputs.npy").string() + " holds features of [20] but " +
           (dir / "wider" / "test_inputs.npy").string() + " holds features of [21]"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run_gputrain(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "runs" / "seed-mlp" / "model.pt"));
  // Splits that agree train; labels of one class only are said to make any model 100% accurate.
  const auto one_class =
      run_gputrain(train_args(dir / "runs", arrays("one", torch::randn({8, 20}), torch::randn({4, 20}))));
  EXPECT_EQ(one_class.exit_code, 0) << one_class.err;
  EXPECT_NE(one_class.err.find("is class 0, so any model is 100% accurate"), std::string::npos) << one_class.err;
}

// Issue 41: a corrupt JPEG in an image folder (its header whole, its pixels cut
// short) exits 2 naming the file before anything trains; with
// data.skip_bad_images the run trains on the rest and its result line counts it.
TEST(CliBadData, ACorruptJpegExitsTwoUnlessSkippedThenTheResultLineCountsIt) {
  TempDir dir;
  const std::string images = make_image_folder(dir.path(), "jpeg", 20, 10).string();
  ASSERT_FALSE(::testing::Test::HasFailure());
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "images" / "train")) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  ASSERT_EQ(files.size(), 20u);
  std::sort(files.begin(), files.end());
  const fs::path corrupt = files.back();
  write_text(corrupt, read_text(corrupt).substr(0, 400));
  const fs::path config =
      write_text(dir / "bad.yaml", "name: bad\ndevice: cpu\ndata: {dataset: image_folder, root: " + images +
                                       ", batch_size: 10, num_workers: 0}\n"
                                       "model: {name: mlp, hidden: [8]}\noptim: {name: sgd, lr: 0.1}\n"
                                       "train: {epochs: 1, tensorboard: false}\noutput: {dir: " +
                                       (dir / "runs").string() + "}\n");
  const ProcessResult refused = run_gputrain({"train", "--config", config.string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(corrupt.string() + ": the JPEG cannot be decoded"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out, "");
  const ProcessResult skipped =
      run_gputrain({"train", "--config", config.string(), "--set", "name=skip", "--set", "data.skip_bad_images=true"});
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_NE(skipped.err.find(corrupt.string() + ": the JPEG cannot be decoded"), std::string::npos) << skipped.err;
  EXPECT_NE(skipped.err.find("left out (data.skip_bad_images)"), std::string::npos) << skipped.err;
  EXPECT_EQ(nlohmann::json::parse(skipped.out)["skipped_images"], 1) << skipped.out;
}

// A batchnorm layer cannot train on a batch of 1: 9 samples in batches of 4
// leave one. Once LibTorch's bare "Expected more than 1 value per channel"
// with exit 1; now exit 2 before training starts, at data.batch_size, naming
// the layer and data.drop_last.
TEST(CliBadData, ABatchnormBatchOfOneNamesDropLast) {
  TempDir dir;
  const fs::path root = dir / "nine";
  fs::create_directories(root);
  data::write_npy(root / "train_inputs.npy", torch::randn({9, 20}));
  data::write_npy(root / "train_targets.npy", torch::arange(9, torch::kInt64).remainder(2));
  data::write_npy(root / "test_inputs.npy", torch::randn({4, 20}));
  data::write_npy(root / "test_targets.npy", torch::arange(4, torch::kInt64).remainder(2));
  std::vector<std::string> sets{
      "data.dataset=npy",  "data.root=" + root.string(),
      "data.batch_size=4", "data.shuffle=false",
      "model.name=layers", "model.layers=[{type: linear, out_features: 8}, batchnorm, relu, linear]"};
  const auto r = run_gputrain(train_args(dir / "runs", sets));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("data.batch_size: 9 training samples in batches of 4 leave a last batch of 1 sample, but "
                       "batchnorm layer 'bn1'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("set data.drop_last: true"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Epoch 1/"), std::string::npos) << "refused before training: " << r.err;
  sets.push_back("data.drop_last=true");
  const auto dropped = run_gputrain(train_args(dir / "runs", sets));
  EXPECT_EQ(dropped.exit_code, 0) << dropped.err;
}

TEST(CliBadPaths, NonUtf8ConfigPathIsPrintedEscaped) {
  TempDir dir;
  const fs::path config = write_text(dir / "caf\xe9.yaml", "seed: -1\n");
  const auto r = run_gputrain({"config", "--config", config.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("caf\\xe9.yaml:1:7: seed: must be >= 0 (got -1)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\xe9'), std::string::npos) << "the raw byte reached the terminal";
}

TEST(CliBadPaths, NonUtf8OutputDirectoryIsRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  const auto r = run_gputrain(train_args(dir / "runs-\xff", {}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("output.dir: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("runs-\\xff"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(CliBadPaths, ConfigThatIsADirectoryOrEndlessIsRefused) {
  TempDir dir;
  const auto directory = run_gputrain({"config", "--config", dir.path().string()});
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
  EXPECT_TRUE(directory.out.empty());
  const auto endless = run_gputrain({"config", "--config", "/dev/zero"});
  EXPECT_EQ(endless.exit_code, 2);
  EXPECT_NE(endless.err.find("larger than"), std::string::npos) << endless.err;
}

// Issue 37: an alias inside the node it names was a SIGSEGV in each of these commands.
TEST(CliBadYaml, AnEndlessAliasIsExit2NamingTheAliasInEveryCommand) {
  TempDir dir;
  const auto config =
      write_text(dir / "endless.yaml", "model:\n  layers: &L [{type: residual, layers: *L}, flatten, linear]\n");
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"config"}, {"config", "--explain"}, {"model"}, {"plan"}}) {
    std::vector<std::string> args = command;
    args.insert(args.end(), {"--config", config.string()});
    const auto r = run_gputrain(args);
    EXPECT_EQ(r.exit_code, 2) << command.front() << ": " << r.err;
    EXPECT_NE((r.out + r.err).find(config.string() + ":2:40: the alias *L is inside the node it names"),
              std::string::npos)
        << r.out << r.err;
  }
}

TEST(CliBadYaml, AliasesExpandingToBillionsAreRefusedAtOnce) {
  TempDir dir;
  std::string yaml = "model:\n  a0: &a0 [lol]\n";
  for (int level = 1; level <= 9; ++level) {
    yaml += "  a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", *a" : "*a") + std::to_string(level - 1);
    yaml += "]\n";
  }
  const auto r = run_gputrain({"model", "--config", write_text(dir / "laughs.yaml", yaml).string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("more than 100000 values once its aliases (*name) are expanded"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gputrain::testing
