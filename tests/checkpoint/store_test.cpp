// Atomic writes and the checkpoint directory's rotation, without LibTorch archives.
#include "gputrain/checkpoint/store.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "gputrain/common/error.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteAtomically, AFullDiskLeavesThePreviousFileAndNoTemporary) {
  TempDir dir;
  const fs::path path = dir / "c.ckpt";
  write_atomically(path, "the good checkpoint");
  WriteHooks full;
  int calls = 0;
  full.write = [&calls](int fd, const char* data, std::size_t size) -> ssize_t {
    if (calls++ == 0) return ::write(fd, data, std::min<std::size_t>(size, 4));
    errno = ENOSPC;
    return -1;
  };
  try {
    write_atomically(path, "a newer checkpoint that does not fit", full);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);  // the user frees space or writes elsewhere (issue 17 #14)
    EXPECT_NE(std::string(e.what()).find(path.string() + ": cannot write: No space left on device"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::read_text(path), "the good checkpoint");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"c.ckpt"});
}

TEST(WriteAtomically, ShortWritesAreResumed) {
  TempDir dir;
  WriteHooks trickle;
  trickle.write = [](int fd, const char* data, std::size_t size) {
    return ::write(fd, data, std::min<std::size_t>(size, 3));
  };
  write_atomically(dir / "c.ckpt", "eleven bytes and then some", trickle);
  EXPECT_EQ(testing::read_text(dir / "c.ckpt"), "eleven bytes and then some");
  EXPECT_EQ(names_in(dir.path()).size(), 1u);
}

ExitCode code_of_writing(const fs::path& path) {
  try {
    write_atomically(path, "x");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path.string() + ": ", 0), 0u) << e.what();
    return e.code();
  }
  ADD_FAILURE() << "wrote " << path;
  return ExitCode::kOk;
}

// Issue 17 #14: a path the user gave that cannot take a file is theirs to fix (exit 2).
TEST(WriteAtomically, PathsThatCannotBeWrittenAreUserErrors) {
  TempDir dir;
  testing::write_text(dir / "file", "a regular file");
  EXPECT_EQ(code_of_writing(dir / "absent" / "c.ckpt"), ExitCode::kUserInput);
  EXPECT_EQ(code_of_writing(dir / "file" / "c.ckpt"), ExitCode::kUserInput);  // ENOTDIR, even as root
  fs::create_directory(dir / "d");
  EXPECT_EQ(code_of_writing(dir / "d"), ExitCode::kUserInput);
  EXPECT_EQ(write_error_code(EIO), ExitCode::kRuntime);
  EXPECT_EQ(write_error_code(EROFS), ExitCode::kUserInput);
  EXPECT_EQ(write_error_code(EDQUOT), ExitCode::kUserInput);
}

// rename() would put a regular file in place of the device.
TEST(WriteAtomically, ADeviceIsRefusedNotReplaced) {
  EXPECT_EQ(code_of_writing("/dev/full"), ExitCode::kUserInput);
  struct stat info {};
  ASSERT_EQ(::stat("/dev/full", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  try {
    write_atomically("/dev/full", "x");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file (a device)"), std::string::npos) << e.what();
  }
}

// Issue 62: a write killed part-way (a large export) leaves its temporary
// file; the next write of the same file removes it once its process has ended,
// and leaves those of running writers and of other files.
TEST(WriteAtomically, RemovesTheTemporariesOfWritesWhoseProcessEnded) {
  TempDir dir;
  const pid_t ended = ::fork();
  if (ended == 0) ::_exit(0);
  ASSERT_GT(ended, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(ended, &status, 0), ended);  // reaped: no process has that pid now
  const std::string dead = std::to_string(ended), alive = std::to_string(::getppid());
  for (const std::string& name : {".m.onnx.tmp-" + dead + "-0", ".m.onnx.tmp-" + alive + "-3",
                                  ".other.onnx.tmp-" + dead + "-0", std::string(".m.onnx.tmp-notapid-0")}) {
    testing::write_text(dir / name, "half a model");
  }
  write_atomically(dir / "m.onnx", "a whole model");
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{".m.onnx.tmp-" + alive + "-3", ".m.onnx.tmp-notapid-0",
                                                            ".other.onnx.tmp-" + dead + "-0", "m.onnx"}));
}

TEST(CheckpointStore, NamesSortLikePositions) {
  EXPECT_EQ(CheckpointStore::file_name({2, 5, 21}), "ckpt-s00000021-e0002-b000005.ckpt");
  TempDir dir;
  CheckpointStore store(dir.path(), 10, std::nullopt);
  store.save({1, 8, 8}, "before the test pass");  // stopped after epoch 2's last step
  store.save({2, 0, 8}, "after it");              // the same step, a later position
  store.save({0, 3, 3}, "early");
  const auto listed = list_checkpoints(dir.path());
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(testing::read_text(listed[0]), "early");
  EXPECT_EQ(testing::read_text(listed[1]), "before the test pass");
  EXPECT_EQ(testing::read_text(listed[2]), "after it");
}

TEST(CheckpointStore, KeepsTheNewestAndTheBest) {
  TempDir dir;
  CheckpointStore store(dir.path(), 2, std::nullopt);
  for (int64_t epoch = 1; epoch <= 4; ++epoch) {
    store.save({epoch, 0, 10 * epoch}, "epoch " + std::to_string(epoch));
    if (epoch == 2) store.save_best("epoch 2");
  }
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"best.ckpt", "ckpt-s00000030-e0003-b000000.ckpt",
                                                            "ckpt-s00000040-e0004-b000000.ckpt"}));
  EXPECT_EQ(testing::read_text(dir / "best.ckpt"), "epoch 2");
}

TEST(CheckpointStore, KeepsOneTimelineAndRemovesTemporaries) {
  TempDir dir;
  const fs::path ckpts = dir / "checkpoints";
  {
    CheckpointStore first(ckpts, 5, std::nullopt);
    first.save({1, 0, 8}, "one");
    first.save({2, 0, 16}, "two");
  }
  testing::write_text(ckpts / ".ckpt-s00000024-e0003-b000000.ckpt.tmp-99-0", "half a write");
  // Resuming from epoch 2: nothing newer, so everything stays but the temporary.
  CheckpointStore resumed(ckpts, 5, Position{2, 0, 16});
  EXPECT_EQ(names_in(ckpts).size(), 2u);
  // Resuming from epoch 1: epoch 2 belongs to another timeline.
  CheckpointStore older(ckpts, 5, Position{1, 0, 8});
  EXPECT_FALSE(fs::exists(ckpts));
  EXPECT_EQ(names_in(dir / "checkpoints.1").size(), 2u);
  // A fresh run moves an earlier run's checkpoints aside too.
  CheckpointStore(ckpts, 5, std::nullopt).save({1, 0, 8}, "new");
  CheckpointStore fresh(ckpts, 5, std::nullopt);
  EXPECT_TRUE(fs::exists(dir / "checkpoints.2" / "ckpt-s00000008-e0001-b000000.ckpt"));
}

}  // namespace
}  // namespace gputrain::checkpoint
