#pragma once
// The checkpoint file's envelope: a fixed header saying what the file is, and
// how long its payload is and what checksum it has, so that a truncated,
// corrupt or foreign file is recognised before LibTorch parses a byte of it.
//
//   offset  size  field (integers little-endian)
//        0     8  magic "\x89GTCKPT\n" (the high byte and newline catch text-mode copies)
//        8     4  format version (kFormatVersion)
//       12     4  header size (32)
//       16     8  payload size in bytes
//       24     4  CRC-32 (zlib) of the payload
//       28     4  CRC-32 of bytes 0..27
//       32     -  payload: a LibTorch serialize archive (see checkpoint.h)
#include <cstdint>
#include <string>
#include <string_view>

namespace gputrain::checkpoint {

// 2: the model's and optimizer's tensors as flat lists (Module::save's tree before).
inline constexpr std::uint32_t kFormatVersion = 2;
inline constexpr std::size_t kHeaderSize = 32;

// `payload` behind a header for it.
std::string seal(std::string_view payload);

// Whether `bytes` starts with the checkpoint magic (as opposed to, say, a
// model.pt weights archive).
bool is_sealed(std::string_view bytes);
// Whether the file at `path` starts as a zip archive does, as the model.pt
// weights a run writes (torch::save), or as a safetensors file; false when it
// cannot be read.
bool is_weights_archive(const std::string& path);

// The payload of a sealed file, after checking the magic, the version, both
// checksums and the length. Throws CheckpointError "<name>: <what is wrong>"
// for an empty, foreign, truncated, corrupt or newer-format file.
std::string_view unseal(std::string_view bytes, const std::string& name);

}  // namespace gputrain::checkpoint
