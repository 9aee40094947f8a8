// Data roots as the file system presents them: read-only or unreadable.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "gputrain/common/error.h"
#include "gputrain/data/dataset.h"
#include "gputrain/data/generate.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::kSetupFailed;
using gputrain::testing::ProcessResult;
using gputrain::testing::TempDir;

config::DataConfig data_config(config::DatasetName dataset, const fs::path& root) {
  config::DataConfig config;
  config.dataset = dataset;
  config.root = root.string();
  return config;
}

// Loads the test split in a child process that has given up root, since root
// reads every file whatever its permission bits say. Exit 0: loaded; 1: the
// error is in `out`.
ProcessResult load_without_root(const config::DataConfig& config) {
  return gputrain::testing::run_in_child(
      [&] {
        make_dataset(config, Split::kTest, 0);
        return std::string("loaded");
      },
      gputrain::testing::without_root());
}

void set_mode(const fs::path& path, fs::perms mode) { fs::permissions(path, mode, fs::perm_options::replace); }

constexpr auto kReadOnlyDir = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
constexpr auto kReadOnlyFile = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;

// One data set per format: CIFAR-10, raw IDX and gzip IDX.
struct Format {
  config::DatasetName dataset;
  bool gzip;
  const char* test_file;  // the file the test split reads first
};

class DataRoot : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (GetParam().dataset == config::DatasetName::kCifar10) {
      write_cifar10_set(dir_.path(), {10, 4, 1});
    } else {
      write_idx_set(dir_.path(), {10, 4, 1}, GetParam().gzip);
    }
  }
  // Permissions back, so that the directory can be removed by anyone.
  void TearDown() override {
    for (const auto& entry : fs::directory_iterator(dir_.path())) set_mode(entry.path(), fs::perms::owner_all);
  }
  config::DataConfig config() const { return data_config(GetParam().dataset, dir_.path()); }
  fs::path test_file() const { return dir_ / GetParam().test_file; }

  TempDir dir_{"gputrain-root"};
};

TEST_P(DataRoot, ReadOnlyDirectoryAndFilesLoad) {
  for (const auto& entry : fs::directory_iterator(dir_.path())) set_mode(entry.path(), kReadOnlyFile);
  set_mode(dir_.path(), kReadOnlyDir);
  const ProcessResult r = load_without_root(config());
  set_mode(dir_.path(), fs::perms::owner_all);
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot give up root here";
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "loaded");
}

TEST_P(DataRoot, UnreadableDirectorySaysPermissionDeniedNotMissing) {
  set_mode(dir_.path(), fs::perms::none);
  const ProcessResult r = load_without_root(config());
  set_mode(dir_.path(), fs::perms::owner_all);
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot give up root here";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(dir_.path().string() + "/"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("lacks"), std::string::npos) << r.out;
}

TEST_P(DataRoot, UnreadableFileSaysPermissionDenied) {
  set_mode(test_file(), fs::perms::none);
  const ProcessResult r = load_without_root(config());
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot give up root here";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(test_file().string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
}

// Issue 17 #15: what stands where a data file should be is named, not called missing.
TEST_P(DataRoot, ADirectoryOrFifoInPlaceOfAFileSaysWhatItIs) {
  fs::remove(test_file());
  fs::create_directory(test_file());
  try {
    make_dataset(config(), Split::kTest, 0);
    ADD_FAILURE() << "a directory loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(test_file().string() + ": is a directory, not a file"), std::string::npos)
        << e.what();
  }
  fs::remove(test_file());
  ASSERT_EQ(::mkfifo(test_file().c_str(), 0600), 0);
  try {
    make_dataset(config(), Split::kTest, 0);
    ADD_FAILURE() << "a FIFO loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(test_file().string() + ": is not a regular file (a FIFO)"), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DataRoot,
                         ::testing::Values(Format{config::DatasetName::kCifar10, false, "test_batch.bin"},
                                           Format{config::DatasetName::kMnist, false, "t10k-images-idx3-ubyte"},
                                           Format{config::DatasetName::kMnist, true, "t10k-images-idx3-ubyte.gz"}),
                         [](const auto& info) {
                           return std::string(config::word(info.param.dataset)) + (info.param.gzip ? "Gzip" : "");
                         });

}  // namespace
}  // namespace gputrain::data
