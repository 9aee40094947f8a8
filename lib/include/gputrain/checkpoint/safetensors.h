#pragma once
// safetensors, the weights format of most model hubs: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range (data_offsets, relative to the data after the header) and an optional
// "__metadata__" of string -> string, then the tensors' raw little-endian bytes.
#include <torch/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain::checkpoint {

struct Safetensors {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;  // in the file's order (by data offset)
  std::map<std::string, std::string> metadata;
};

// Checks and parses a safetensors file's bytes; `name` (the file) begins every
// error. Anything but a well-formed file (cut short, a header length past the
// end, invalid JSON or UTF-8, an unknown dtype, offsets out of range,
// overlapping or leaving gaps, a shape that disagrees with its bytes) is a
// CheckpointError saying what is wrong; it never allocates more than the
// bytes it is given. The fuzz target's entry point.
Safetensors parse_safetensors(std::string_view bytes, const std::string& name);
// parse_safetensors of a file; a missing or unreadable file is a CheckpointError too.
Safetensors read_safetensors(const std::filesystem::path& path);

// Whether `bytes` begin as a safetensors file does (a header length, then '{'):
// what tells one from a LibTorch archive (a zip) or a checkpoint.
bool looks_like_safetensors(std::string_view bytes);

// The file of `file.tensors` (contiguous copies on the CPU; bool, uint8, int8,
// int16, int32, int64, float16, bfloat16, float32 and float64) and
// `file.metadata`. The header is padded with spaces to a multiple of 8 bytes,
// as the reference writer does, so every tensor starts aligned.
std::string safetensors_bytes(const Safetensors& file);

}  // namespace gputrain::checkpoint
