#pragma once
// Byte-level edits of generated files, to build each kind of bad input.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace gputrain::data::testing {

inline std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

// Overwrites the bytes at `offset` with `bytes`.
inline void patch(const std::filesystem::path& file, std::size_t offset, const std::string& bytes) {
  std::string content = read_bytes(file);
  content.replace(offset, bytes.size(), bytes);
  write_bytes(file, content);
}

}  // namespace gputrain::data::testing
