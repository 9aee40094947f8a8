// `gputrain datasets make-*` through the real binary.
#include <gtest/gtest.h>

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
  const auto r = run_gputrain({"datasets", "make-cifar", "--out", out.string(), "--train", "12", "--test", "3",
                               "--seed", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote 12 training and 3 test images"), std::string::npos) << r.err;
  expect_matches(*load(config::DatasetName::kCifar10, out, Split::kTrain), make_image_set(12, 3, 32, 4, Split::kTrain));
  expect_matches(*load(config::DatasetName::kCifar10, out, Split::kTest), make_image_set(3, 3, 32, 4, Split::kTest));
}

TEST(DatasetsCommand, MakeIdxWritesGzipFiles) {
  TempDir dir;
  const auto r = run_gputrain({"datasets", "make-idx", "--out", dir.path().string(), "--train", "20", "--test", "5",
                               "--gzip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "t10k-labels-idx1-ubyte.gz"));
  expect_matches(*load(config::DatasetName::kMnist, dir.path(), Split::kTrain), make_image_set(20, 1, 28, 0, Split::kTrain));
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

}  // namespace
}  // namespace gputrain::data
