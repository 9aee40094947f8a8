// `gputrain datasets make-*` through the real binary.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <filesystem>

#include "gputrain/data/dataset.h"
#include "gputrain/data/generate.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::run_gputrain;
using gputrain::testing::TempDir;

std::shared_ptr<const Dataset> load(config::DatasetName dataset, const fs::path& root, Split split) {
  config::DataConfig config;
  config.dataset = dataset;
  config.root = root.string();
  return make_dataset(config, split, 0);
}

void expect_matches(const Dataset& dataset, const ImageSet& set) {
  ASSERT_EQ(dataset.info().samples, set.size());
  const torch::Tensor pixels = torch::from_blob(const_cast<uint8_t*>(set.pixels.data()),
                                                {set.size(), set.channels, set.height, set.width}, torch::kUInt8);
  EXPECT_TRUE(torch::equal(dataset.inputs(), pixels));
}

TEST(DatasetsCommand, MakeCifarWritesWhatTheReaderReads) {
  TempDir dir;
  const fs::path out = dir / "cifar";
  const auto r =
      run_gputrain({"datasets", "make-cifar", "--out", out.string(), "--train", "12", "--test", "3", "--seed", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote 12 training and 3 test images"), std::string::npos) << r.err;
  expect_matches(*load(config::DatasetName::kCifar10, out, Split::kTrain), make_image_set(12, 3, 32, 4, Split::kTrain));
  expect_matches(*load(config::DatasetName::kCifar10, out, Split::kTest), make_image_set(3, 3, 32, 4, Split::kTest));
}

TEST(DatasetsCommand, MakeIdxWritesGzipFiles) {
  TempDir dir;
  const auto r =
      run_gputrain({"datasets", "make-idx", "--out", dir.path().string(), "--train", "20", "--test", "5", "--gzip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "t10k-labels-idx1-ubyte.gz"));
  expect_matches(*load(config::DatasetName::kMnist, dir.path(), Split::kTrain),
                 make_image_set(20, 1, 28, 0, Split::kTrain));
}

TEST(DatasetsCommand, BadArgumentsExitTwo) {
  TempDir dir;
  const std::string out = (dir / "x").string();
  EXPECT_EQ(run_gputrain({"datasets"}).exit_code, 2);
  EXPECT_EQ(run_gputrain({"datasets", "make-cifar"}).exit_code, 2);  // --out is required
  EXPECT_EQ(run_gputrain({"datasets", "make-idx", "--out", out, "--train", "many"}).exit_code, 2);
  EXPECT_EQ(run_gputrain({"datasets", "make-cifar", "--out", out, "--gzip"}).exit_code, 2);  // idx only
  const auto few = run_gputrain({"datasets", "make-cifar", "--out", out, "--train", "3"});
  EXPECT_EQ(few.exit_code, 2);
  EXPECT_NE(few.err.find("must be >= 5 (got 3)"), std::string::npos) << few.err;
  const auto none = run_gputrain({"datasets", "make-idx", "--out", out, "--test", "0"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_FALSE(fs::exists(out));  // nothing written on bad arguments
}

// Issue 17 #19: a second make-* into the same --out needs --force.
TEST(DatasetsCommand, AnExistingSetIsReplacedOnlyWithForce) {
  TempDir dir;
  for (const std::string command : {"make-cifar", "make-idx"}) {
    SCOPED_TRACE(command);
    const fs::path out = dir / command;
    const std::vector<std::string> make{"datasets", command, "--out", out.string(), "--train", "10", "--test", "2"};
    ASSERT_EQ(run_gputrain(make).exit_code, 0);
    const fs::path file = out / (command == "make-cifar" ? "test_batch.bin" : "t10k-images-idx3-ubyte");
    const std::string first = testing::read_text(file);
    std::vector<std::string> again = make;
    again.insert(again.end(), {"--seed", "9"});
    const auto refused = run_gputrain(again);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find(out.string() + ": holds a data set already"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("add --force"), std::string::npos) << refused.err;
    EXPECT_EQ(testing::read_text(file), first);
    again.push_back("--force");
    ASSERT_EQ(run_gputrain(again).exit_code, 0);
    EXPECT_NE(testing::read_text(file), first);
  }
}

// Issue 17 #14: a full disk or an --out that cannot be a directory is the
// user's to fix (exit 2), and a set that did not fit leaves no file behind.
TEST(DatasetsCommand, AFullDiskOrABadOutExitsTwoAndLeavesNothing) {
  TempDir dir;
  testing::write_text(dir / "file", "a regular file");
  for (const fs::path& out : {dir / "file" / "set", fs::path("/dev/full")}) {
    const auto r = run_gputrain({"datasets", "make-idx", "--out", out.string(), "--train", "10", "--test", "2"});
    EXPECT_EQ(r.exit_code, 2) << out << r.err;
    EXPECT_NE(r.err.find(out.string()), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  // 20 records (61 KB) fit in each data_batch file, 40 (123 KB) do not fit in test_batch.bin.
  const fs::path out = dir / "cifar";
  const auto r = run_gputrain({"datasets", "make-cifar", "--out", out.string(), "--train", "100", "--test", "40"}, {},
                              testing::kSourceDir, testing::file_size_limit(100000));
  if (r.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("test_batch.bin: cannot write: File too large"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::is_directory(out));
  EXPECT_TRUE(fs::is_empty(out)) << "the data_batch files of the unfinished set are left";
}

// Issue 17 #7: the set is generated and written in pieces, so memory does not
// grow with the count (it held the whole set, twice, before).
TEST(DatasetsCommand, MemoryDoesNotGrowWithTheCount) {
  TempDir dir;
  const auto peak_rss_of_children = [] {
    struct rusage usage {};
    getrusage(RUSAGE_CHILDREN, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
  };
  const auto small =
      run_gputrain({"datasets", "make-idx", "--out", (dir / "small").string(), "--train", "10", "--test", "1"});
  ASSERT_EQ(small.exit_code, 0) << small.err;
  const int64_t baseline = peak_rss_of_children();
  // 250000 images of 28 x 28: 196 MB on disk.
  const auto large =
      run_gputrain({"datasets", "make-idx", "--out", (dir / "large").string(), "--train", "250000", "--test", "1"});
  ASSERT_EQ(large.exit_code, 0) << large.err;
  EXPECT_EQ(fs::file_size(dir / "large" / "train-images-idx3-ubyte"), 16u + 250000u * 784u);
  EXPECT_LT(peak_rss_of_children() - baseline, int64_t{48} << 20);
}

}  // namespace
}  // namespace gputrain::data
