// The TensorBoard encoder's parts against known values: CRC-32C, TFRecord
// framing and the Event protocol buffers, byte for byte.
#include "gputrain/report/event_file.h"

#include <gtest/gtest.h>

#include <cstring>

#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out += static_cast<char>(v);
  return out;
}

uint32_t le32(const std::string& s, std::size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

TEST(Crc32c, MatchesPublishedVectorsAndTfRecordsMask) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, as TensorFlow's crc32c::Mask
  EXPECT_EQ(masked_crc32c("123456789"), 0xC78AB0E5u);
}

TEST(TfRecord, FramesLengthAndPayloadWithTheirChecksums) {
  const std::string record = tfrecord("abc");
  ASSERT_EQ(record.size(), 8u + 4u + 3u + 4u);
  const std::string length = record.substr(0, 8);
  EXPECT_EQ(length, bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(le32(record, 8), masked_crc32c(length));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(le32(record, 15), masked_crc32c("abc"));
}

TEST(EventProto, FileVersionAndScalarEventBytes) {
  // wall_time (field 1, fixed64) 1.5, no step (proto3 default), file_version (field 3)
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x1a, 13}) + "brain.Event:2";
  EXPECT_EQ(file_version_event(1.5), expected);
  // step 300 is varint ac 02; summary (field 5) { value (1) { tag (1) "a", simple_value (2, fixed32) 0.5f } }
  const std::string scalar =
      bytes({0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x10, 0xac, 0x02, 0x2a, 10, 0x0a, 8, 0x0a, 1, 'a', 0x15, 0, 0, 0, 0x3f});
  EXPECT_EQ(scalars_event(2.0, 300, {{"a", 0.5f}}), scalar);
}

TEST(EventFile, StartsWithTheVersionRecordAndAppendsFramedEvents) {
  testing::TempDir dir;
  std::filesystem::path path;
  {
    EventFile file(dir.path());
    path = file.path();
    file.add(7, {{"train/loss", 0.25f}, {"train/lr", 0.1f}});
    file.add(8, {});  // nothing to write
  }
  EXPECT_EQ(path.parent_path(), dir.path());
  EXPECT_EQ(path.filename().string().rfind("events.out.tfevents.", 0), 0u) << path;
  const std::string data = testing::read_text(path);
  // Walk the records: each length is followed by a valid masked CRC, and the payloads decode as written.
  std::vector<std::string> payloads;
  for (std::size_t at = 0; at < data.size();) {
    ASSERT_LE(at + 12, data.size());
    uint64_t length = 0;
    std::memcpy(&length, data.data() + at, 8);
    ASSERT_EQ(le32(data, at + 8), masked_crc32c(data.substr(at, 8)));
    const std::string payload = data.substr(at + 12, length);
    ASSERT_EQ(le32(data, at + 12 + length), masked_crc32c(payload));
    payloads.push_back(payload);
    at += 12 + length + 4;
  }
  ASSERT_EQ(payloads.size(), 2u);
  EXPECT_NE(payloads[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(payloads[1].find("train/loss"), std::string::npos);
  EXPECT_NE(payloads[1].find("train/lr"), std::string::npos);
}

}  // namespace
}  // namespace gputrain::report
