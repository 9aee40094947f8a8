// `gputrain train` and `gputrain test` end to end, as a user runs them, on a
// small generated CIFAR-format set.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

// Issue 62: train.log holds the whole run's log, the decisions logged before
// the run directory existed (the resume choice, the processes, the data, the
// batch, the fast paths) included: every line the console got.
TEST(TrainLog, HoldsEveryLineOfTheConsoleFromTheRunsStart) {
  TempDir dir;
  const auto config = write_text(dir / "t.yaml", R"(
name: t
device: cpu
data: {dataset: synthetic, samples: 32, test_samples: 16, features: 4, classes: 2, batch_size: 16, num_workers: 0}
model: {name: mlp, hidden: [8]}
train: {epochs: 1, tensorboard: false}
)");
  const auto r = run_gputrain({"train", "--config", config.string(), "--output", (dir / "runs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string log = read_text(dir / "runs" / "t" / "train.log");
  std::istringstream console(r.err);
  int lines = 0;
  for (std::string line; std::getline(console, line); ++lines) {
    const std::size_t message = line.find("] ", line.find("] ") + 2);  // after "[time] [level] "
    ASSERT_NE(message, std::string::npos) << line;
    EXPECT_NE(log.find(line.substr(message + 2)), std::string::npos) << line;
  }
  EXPECT_GT(lines, 5) << r.err;
  EXPECT_NE(log.find("processes: "), std::string::npos) << log;
}

class TrainProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto made = run_gputrain({"datasets", "make-cifar", "--out", (dir_ / "cifar").string(), "--train", "600",
                                    "--test", "200", "--seed", "1"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }

  ProcessResult train(const std::string& output) {
    return run_gputrain({"train", "--config", "configs/cifar10.yaml", "--output", (dir_ / output).string(), "--set",
                         "data.root=" + (dir_ / "cifar").string(), "--set", "train.epochs=2", "--set",
                         "data.batch_size=50", "--set", "data.num_workers=2", "--set", "train.log_every=4", "--set",
                         "device=cpu"});
  }

  std::vector<nlohmann::json> metrics(const std::string& output) const {
    std::vector<nlohmann::json> lines;
    std::ifstream in(dir_ / output / "cifar10-seed" / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

  TempDir dir_;
};

TEST_F(TrainProcess, TrainsTestsAndWritesTheRunDirectory) {
  const auto r = train("a");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex test_line(R"(Test set: Average loss: \d+\.\d{4}, Accuracy: \d+/200 \(\d+%\))");
  std::smatch last;
  std::string::const_iterator from = r.err.cbegin();
  int test_lines = 0;
  for (std::smatch m; std::regex_search(from, r.err.cend(), m, test_line); from = m.suffix().first) {
    ++test_lines;
    last = m;
  }
  EXPECT_EQ(test_lines, 2) << r.err;
  EXPECT_NE(r.err.find("model: cifar10_cnn, 62006 parameters"), std::string::npos);
  EXPECT_NE(r.err.find("conv1: Conv2d(3, 6"), std::string::npos);

  const auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["epochs"], 2);
  EXPECT_EQ(summary["steps"], 24);

  const auto run = dir_ / "a" / "cifar10-seed";
  for (const char* file : {"config.yaml", "train.log", "metrics.jsonl", "model.pt"}) {
    EXPECT_TRUE(std::filesystem::exists(run / file)) << file;
  }
  const auto lines = metrics("a");
  ASSERT_EQ(lines.size(), 2u * (3 + 2));  // per epoch: steps 4, 8, 12 (or 16, 20, 24), then train and test
  EXPECT_EQ(lines.back()["split"], "test");

  // The saved weights reproduce the last test line exactly: the same binary in the same environment (this
  // test's: thread count, instruction set) runs the same kernels in the same order, to the bit.
  const auto tested =
      run_gputrain({"test", "--config", (run / "config.yaml").string(), "--checkpoint", (run / "model.pt").string()});
  ASSERT_EQ(tested.exit_code, 0) << tested.err;
  std::istringstream out(tested.out);
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, last.str());
  // Then the CIFAR-10 tutorial's line per class, from the confusion matrix the epoch's test record holds.
  const nlohmann::json& confusion = lines.back()["confusion"];
  ASSERT_EQ(confusion.size(), 10u);
  int64_t samples = 0;
  const std::vector<std::string> names{"airplane", "automobile", "bird",  "cat",  "deer",
                                       "dog",      "frog",       "horse", "ship", "truck"};
  for (std::size_t c = 0; c < 10; ++c) {
    int64_t row_total = 0;
    for (const auto& n : confusion[c]) row_total += n.get<int64_t>();
    samples += row_total;
    ASSERT_TRUE(std::getline(out, line));
    EXPECT_EQ(line.rfind("Accuracy of class " + std::to_string(c) + " (" + names[c] + "): ", 0), 0u) << line;
    EXPECT_NE(line.find("(" + std::to_string(confusion[c][c].get<int64_t>()) + "/" + std::to_string(row_total) + ")"),
              std::string::npos)
        << line;
    EXPECT_EQ(lines.back()["per_class_accuracy"][c].get<double>(),
              static_cast<double>(confusion[c][c].get<int64_t>()) / static_cast<double>(row_total));
  }
  EXPECT_EQ(samples, 200);
  EXPECT_FALSE(std::getline(out, line));
  EXPECT_NE(testing::read_text(run / "report.html").find("Test split by class (epoch 2)"), std::string::npos);
}

// To the bit: two runs of the same binary in the same environment (this test's) run the same kernels in the
// same order, as a resumed run does; on another machine or thread count they would differ by rounding.
TEST_F(TrainProcess, SameSeedSameMetrics) {
  ASSERT_EQ(train("a").exit_code, 0);
  ASSERT_EQ(train("b").exit_code, 0);
  const auto a = metrics("a");
  const auto b = metrics("b");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << i;
    EXPECT_EQ(a[i]["accuracy"], b[i]["accuracy"]) << i;
  }
}

TEST_F(TrainProcess, MissingDataExitsTwoNamingTheDirectory) {
  const auto r = run_gputrain({"train", "--config", "configs/cifar10.yaml", "--output", (dir_ / "x").string(), "--set",
                               "data.root=" + (dir_ / "nowhere").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find((dir_ / "nowhere").string()), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gputrain::testing

namespace gputrain::testing {
namespace {

// Seed 000's regression: its interval lines and metrics say nothing of an accuracy it does not have.
TEST(RegressionRun, LogsAndRecordsNoAccuracy) {
  TempDir dir;
  const auto r = run_gputrain({"train", "--config", "configs/seed_regression.yaml", "--output", dir.path().string(),
                               "--set", "device=cpu", "--set", "train.epochs=1", "--set", "train.tensorboard=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("step 10: loss "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("accuracy"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a regression on 1 target"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("finished 1 epoch (32 steps)"), std::string::npos) << r.err;
  std::ifstream in(dir / "seed-regression" / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_EQ(line.find("accuracy"), std::string::npos) << line;
  }
  EXPECT_GT(lines, 2);
}

std::uintmax_t events_bytes(const std::filesystem::path& run) {
  std::uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run)) {
    if (entry.path().filename().string().rfind("events.", 0) == 0) bytes += entry.file_size();
  }
  return bytes;
}

// Issue 62 #6: past 100 classes the test records hold each class's accuracy
// and the 20 commonest confusions, not a classes-squared matrix: 5000 classes
// wrote 25 M cells per evaluation (a 100 MB metrics.jsonl, a 250 MB report).
// `gputrain plan` says which form the run records.
TEST(ManyClassesRun, RecordsItsCommonestConfusionsInBoundedFiles) {
  TempDir dir;
  const std::filesystem::path config = write_text(dir / "many.yaml", R"(name: many
device: cpu
data: {dataset: synthetic, samples: 64, test_samples: 64, features: 4, classes: 5000, batch_size: 16, num_workers: 0}
model: {name: mlp, hidden: [8]}
optim: {name: sgd, lr: 0.1}
train: {epochs: 2, tensorboard: true}
checkpoint: {every: 0}
)");
  const auto planned =
      run_gputrain({"plan", "--config", config.string(), "--set", "output.dir=" + dir.path().string()});
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  EXPECT_NE(planned.out.find("by_class: each class's accuracy and the 20 commonest confusions"), std::string::npos)
      << planned.out;
  const auto r = run_gputrain({"train", "--config", config.string(), "--output", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::filesystem::path run = dir / "many";
  // Each test record: 5000 accuracies (null for a class without test samples) and 20 confusions.
  EXPECT_LT(std::filesystem::file_size(run / "metrics.jsonl"), 256u << 10);
  EXPECT_LT(std::filesystem::file_size(run / "report.html"), 256u << 10);
  EXPECT_LT(events_bytes(run), 64u << 10);
  std::ifstream in(run / "metrics.jsonl");
  nlohmann::json test;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["kind"] == "test") test = record;
  }
  ASSERT_FALSE(test.is_null());
  EXPECT_FALSE(test.contains("confusion"));
  EXPECT_EQ(test["per_class_accuracy"].size(), 5000u);
  ASSERT_TRUE(test.contains("top_confusions"));
  EXPECT_LE(test["top_confusions"].size(), 20u);
  int64_t mistakes = 0;
  for (const auto& c : test["top_confusions"]) mistakes += c["count"].get<int64_t>();
  EXPECT_LE(mistakes, 64 - test["correct"].get<int64_t>());
  EXPECT_NE(read_text(run / "report.html").find("the commonest confusions"), std::string::npos);
}

}  // namespace
}  // namespace gputrain::testing
