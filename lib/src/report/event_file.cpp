#include "gputrain/report/event_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/common/process.h"

namespace gputrain::report {

namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);  // reflected Castagnoli
    table[i] = crc;
  }
  return table;
}

void put_fixed(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xffu);
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7fu) | 0x80u);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

// Protocol-buffer fields by wire type: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field << 3 | wire_type));
}

void put_double(std::string& out, int field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, 1);
  put_fixed(out, bits, 8);
}

void put_float(std::string& out, int field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, 5);
  put_fixed(out, bits, 4);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

std::string event_header(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {  // proto3 leaves default values out
    put_key(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) crc = table[(crc ^ byte) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view payload) {
  std::string length;
  put_fixed(length, payload.size(), 8);
  std::string record = length;
  put_fixed(record, masked_crc32c(length), 4);
  record += payload;
  put_fixed(record, masked_crc32c(payload), 4);
  return record;
}

std::string file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string entry;
    put_bytes(entry, 1, tag);
    put_float(entry, 2, value);
    put_bytes(summary, 1, entry);
  }
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

EventFile::EventFile(const std::filesystem::path& dir) {
  static std::atomic<int> files{0};
  const double now = now_seconds();
  path_ =
      dir / fmt::format("{}{}.{}.{}.{}", kEventFilePrefix, static_cast<int64_t>(now), host_name(), getpid(), files++);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw UserError(fmt::format("{}: cannot create the TensorBoard event file", path_.string()));
  write(file_version_event(now));
}

void EventFile::add(int64_t step, const std::vector<Scalar>& scalars) {
  if (!scalars.empty()) write(scalars_event(now_seconds(), step, scalars));
}

void EventFile::write(const std::string& event) {
  out_ << tfrecord(event);
  out_.flush();
  if (!out_) {
    const int error = errno;
    throw Error(write_error_code(error),
                fmt::format("{}: cannot write TensorBoard events: {}", path_.string(), std::strerror(error)));
  }
}

}  // namespace gputrain::report
