#include "gputrain/checkpoint/format.h"

#include <fmt/format.h>

#include <zlib.h>
#include <fstream>

#include <cctype>

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/common/error.h"

namespace gputrain::checkpoint {

namespace {

constexpr std::string_view kMagic{"\x89GTCKPT\n", 8};
constexpr std::string_view kZipMagic{"PK\x03\x04", 4};

std::uint32_t crc32_of(std::string_view bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

template <typename T>
void put(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <typename T>
T get(std::string_view bytes, std::size_t offset) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value |= static_cast<T>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

// The first bytes as text a person can recognise, for "not a checkpoint" errors.
std::string preview(std::string_view bytes) {
  std::string out;
  for (char c : bytes.substr(0, 8)) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isprint(u) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw CheckpointError(fmt::format("{}: {}", name, problem));
}

}  // namespace

std::string seal(std::string_view payload) {
  std::string out(kMagic);
  put<std::uint32_t>(out, kFormatVersion);
  put<std::uint32_t>(out, static_cast<std::uint32_t>(kHeaderSize));
  put<std::uint64_t>(out, payload.size());
  put<std::uint32_t>(out, crc32_of(payload));
  put<std::uint32_t>(out, crc32_of(out));
  out.append(payload);
  return out;
}

bool is_sealed(std::string_view bytes) { return bytes.substr(0, kMagic.size()) == kMagic; }

bool is_weights_archive(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string start(9, '\0');  // a zip's magic, or a safetensors header's length and its '{'
  in.read(start.data(), static_cast<std::streamsize>(start.size()));
  start.resize(static_cast<std::size_t>(in.gcount()));
  return start.substr(0, kZipMagic.size()) == kZipMagic || looks_like_safetensors(start);
}

std::string_view unseal(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) fail(name, "empty file, not a checkpoint");
  if (!is_sealed(bytes)) {
    if (bytes.size() < kMagic.size() && kMagic.substr(0, bytes.size()) == bytes) {
      fail(name, fmt::format("truncated: {} bytes, less than the checkpoint header's {}", bytes.size(), kHeaderSize));
    }
    if (bytes.substr(0, kZipMagic.size()) == kZipMagic) {
      fail(name,
           "not a gputrain checkpoint but a zip archive, such as the model.pt weights a run writes; "
           "--resume needs a file from the run's checkpoint directory");
    }
    fail(name, fmt::format("not a gputrain checkpoint (it starts with '{}')", preview(bytes)));
  }
  if (bytes.size() < kHeaderSize) {
    fail(name, fmt::format("truncated: {} bytes, less than the checkpoint header's {}", bytes.size(), kHeaderSize));
  }
  if (get<std::uint32_t>(bytes, 28) != crc32_of(bytes.substr(0, 28)))
    fail(name, "corrupt: the header's checksum does not match");
  const auto version = get<std::uint32_t>(bytes, 8);
  if (version > kFormatVersion) {
    fail(name, fmt::format("checkpoint format version {} is newer than this gputrain reads ({}); use the gputrain "
                           "that wrote it, or a newer one",
                           version, kFormatVersion));
  }
  if (version == 0 || get<std::uint32_t>(bytes, 12) != kHeaderSize) {
    fail(name,
         fmt::format("corrupt: format version {} with a header of {} bytes", version, get<std::uint32_t>(bytes, 12)));
  }
  const auto payload_size = get<std::uint64_t>(bytes, 16);
  const std::size_t available = bytes.size() - kHeaderSize;
  if (payload_size > available) {
    fail(name, fmt::format("truncated: {} bytes, but its header says {} (the write was cut short?)", bytes.size(),
                           kHeaderSize + payload_size));
  }
  if (payload_size < available) {
    fail(name, fmt::format("corrupt: {} bytes after the end its header gives ({} bytes)", available - payload_size,
                           kHeaderSize + payload_size));
  }
  const std::string_view payload = bytes.substr(kHeaderSize);
  const std::uint32_t stored = get<std::uint32_t>(bytes, 24);
  const std::uint32_t computed = crc32_of(payload);
  if (stored != computed) {
    fail(name, fmt::format("corrupt: the payload's checksum is {:08x}, the header says {:08x}", computed, stored));
  }
  return payload;
}

}  // namespace gputrain::checkpoint
