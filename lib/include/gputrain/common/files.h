#pragma once
// Writing a file so that whatever happens part-way (a full disk, a kill, a
// power cut) leaves either the previous version or the whole new one.
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace gputrain {

// Marks the temporary files write_atomically leaves when killed mid-write:
// ".<name>.tmp-<pid>-<n>" beside the target.
inline constexpr const char* kAtomicTemporaryMark = ".tmp-";

// Test hooks for writes; the defaults write normally.
struct WriteHooks {
  // Called instead of write(2), with its contract: the bytes written, or -1
  // with errno set. Tests return short counts, or -1 with ENOSPC for a full disk.
  std::function<ssize_t(int fd, const char* data, std::size_t size)> write;
  // Seconds to sleep once half the bytes are in the temporary file, so that a
  // test can kill the process in the middle of a write.
  double pause_mid_write_s = 0;
};

// Replaces `path` by `bytes` so that it holds either its old content or all of
// the new, whatever happens: a temporary file in the same directory, written,
// fsync'ed, renamed over `path`, then the directory fsync'ed. On failure the
// temporary file is removed, `path` is untouched, and an Error (exit 1) names
// the file and the cause.
void write_atomically(const std::filesystem::path& path, std::string_view bytes, const WriteHooks& hooks = {});

// Why `path` cannot be read as a regular file, as the rest of a message after
// "<path>: ": "no such file", "is a directory", "is not a regular file (a FIFO)",
// "is a symbolic link loop", or the system's reason; "" when it is a regular
// file (through symbolic links).
std::string not_a_regular_file(const std::filesystem::path& path);

}  // namespace gputrain
