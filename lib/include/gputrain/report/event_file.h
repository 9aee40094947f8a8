#pragma once
// TensorBoard event files, written without TensorFlow: TFRecord framing around
// Event protocol buffers, of which only scalars are needed. No maintained C++
// library for this exists in Debian, and the format is small and stable:
//   record = uint64 length | uint32 masked_crc32c(length) | payload | uint32 masked_crc32c(payload)
//   Event  { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; }
// (tensorflow/core/util/event.proto, core/framework/summary.proto, core/lib/io/record_writer.cc)
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain::report {

// CRC-32C (Castagnoli polynomial), the checksum TFRecord uses.
uint32_t crc32c(std::string_view bytes);
// TFRecord stores CRCs rotated and offset, so a CRC of CRCs stays meaningful.
uint32_t masked_crc32c(std::string_view bytes);
// One framed record, little-endian as TFRecord writes it.
std::string tfrecord(std::string_view payload);

// Serialised Event messages.
std::string file_version_event(double wall_time);  // "brain.Event:2", every file's first record
using Scalar = std::pair<std::string, float>;      // tag, value
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

// How every event file's name begins; TensorBoard reads the files whose names hold "tfevents".
inline constexpr const char* kEventFilePrefix = "events.out.tfevents.";

// One event file in `dir`, named as TensorBoard's writers name theirs
// (events.out.tfevents.<seconds>.<host>.<pid>.<n>), so `tensorboard --logdir`
// finds it. Every add is flushed: a crashed run keeps what it logged.
class EventFile {
 public:
  // Throws UserError when the file cannot be created.
  explicit EventFile(const std::filesystem::path& dir);
  void add(int64_t step, const std::vector<Scalar>& scalars);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace gputrain::report
