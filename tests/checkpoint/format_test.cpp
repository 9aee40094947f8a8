// The checkpoint envelope: every way a file can be wrong gives its own error naming the file.
#include "gputrain/checkpoint/format.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <filesystem>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/common/error.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

// The message unseal() throws for `bytes`, or "" when it accepts them.
std::string problem(const std::string& bytes) {
  try {
    unseal(bytes, "runs/x/checkpoints/c.ckpt");
    return "";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    return e.what();
  }
}

void expect_problem(const std::string& bytes, const std::string& part) {
  const std::string message = problem(bytes);
  EXPECT_EQ(message.rfind("runs/x/checkpoints/c.ckpt: ", 0), 0u) << message;
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

const std::string kPayload = "the payload \x00\x01\xff bytes";

TEST(CheckpointFormat, SealedPayloadComesBackIntact) {
  const std::string sealed = seal(kPayload);
  EXPECT_EQ(sealed.size(), kHeaderSize + kPayload.size());
  EXPECT_TRUE(is_sealed(sealed));
  EXPECT_EQ(unseal(sealed, "c"), kPayload);
  EXPECT_EQ(unseal(seal(""), "c"), "");
}

TEST(CheckpointFormat, TruncatedFilesSayHowShort) {
  const std::string sealed = seal(kPayload);
  expect_problem(sealed.substr(0, sealed.size() - 1), "truncated");
  expect_problem(sealed.substr(0, 20), "truncated: 20 bytes, less than the checkpoint header's 32");
  expect_problem(sealed.substr(0, 3), "truncated");
  expect_problem("", "empty file");
}

TEST(CheckpointFormat, FlippedBitsAreCorrupt) {
  std::string payload_flip = seal(kPayload);
  payload_flip[kHeaderSize + 3] ^= 0x10;
  expect_problem(payload_flip, "corrupt: the payload's checksum");
  std::string header_flip = seal(kPayload);
  header_flip[17] ^= 0x01;  // the payload size
  expect_problem(header_flip, "corrupt: the header's checksum");
  expect_problem(seal(kPayload) + "x", "corrupt: 1 bytes after the end");
}

TEST(CheckpointFormat, ForeignFilesAreNamedAsSuch) {
  expect_problem("model:\n  name: mlp\n", "not a gputrain checkpoint (it starts with 'model:\\x0a ')");
  expect_problem(std::string("PK\x03\x04rest of a zip", 18), "zip archive, such as the model.pt");
}

TEST(CheckpointFormat, NewerFormatVersionsAreRefused) {
  std::string sealed = seal(kPayload);
  sealed[8] = static_cast<char>(kFormatVersion + 1);  // the version, with the header's checksum made to match
  const uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(sealed.data()), 28);
  for (int i = 0; i < 4; ++i) sealed[28 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
  expect_problem(sealed, fmt::format("checkpoint format version {} is newer than this gputrain reads ({})",
                                     kFormatVersion + 1, kFormatVersion));
}

}  // namespace
}  // namespace gputrain::checkpoint

namespace gputrain::checkpoint {
namespace {

// Issue 17 #15: a directory, FIFO or symlink loop given as a checkpoint says what it is.
TEST(CheckpointFile, NonRegularFilesSayWhatTheyAre) {
  testing::TempDir dir;
  const std::filesystem::path fifo = dir / "fifo.ckpt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "loop.ckpt", dir / "loop.ckpt");
  const std::vector<std::pair<std::filesystem::path, std::string>> cases{
      {dir.path(), "is a directory, not a file"},
      {fifo, "is not a regular file (a FIFO)"},
      {dir / "loop.ckpt", "is a symbolic link loop"},
      {dir / "absent.ckpt", "no such file"},
  };
  for (const auto& [path, text] : cases) {
    try {
      Checkpoint::read(path);
      ADD_FAILURE() << path << " read";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string() + ": " + text), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace gputrain::checkpoint
