#pragma once
// Writing a file so that whatever happens part-way (a full disk, a kill, a
// power cut) leaves either the previous version or the whole new one.
#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain {

// Marks the temporary files write_atomically leaves when killed mid-write:
// ".<name>.tmp-<pid>-<n>" beside the target (a long name cut to fit). The
// next write of that target removes those whose process has ended.
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
// temporary file is removed, `path` is untouched, and an Error names the file
// and the cause: exit 2 (write_error_code) for what the user fixes, such as a
// full disk, a missing or read-only directory, or a `path` that is a directory
// or a device (which is refused before anything is written).
void write_atomically(const std::filesystem::path& path, std::string_view bytes, const WriteHooks& hooks = {});

// One file of write_atomically_together.
struct FileBytes {
  std::filesystem::path path;
  std::string_view bytes;
};

// write_atomically for files that belong together (a module and its weights):
// each is written in full to its temporary before any is renamed, then they
// are renamed in order. A failure or a kill before the renames leaves every
// earlier version in place, and the last file is never in place without the
// others (the last rename is the short window in which it may be the old one).
void write_atomically_together(const std::vector<FileBytes>& files, const WriteHooks& hooks = {});

// Takes each piece of a file in order.
using ByteSink = std::function<void(std::string_view piece)>;

// write_atomically for a file too large to hold in memory: `produce` passes
// its pieces to the sink it is given, and may throw to abandon the file.
void write_atomically_in_pieces(const std::filesystem::path& path, const std::function<void(const ByteSink&)>& produce,
                                const WriteHooks& hooks = {});

// fsync(2)s a directory, so that a rename into it survives a power cut; a
// failure is logged as a warning (the rename itself is done).
void sync_directory(const std::filesystem::path& dir);

// The exit code of a failed write with errno `error`: 2 (user input) where the
// user fixes the cause (no space or quota left, a file size limit, a read-only
// file system, no permission, a path that does not lead to a directory), else 1.
ExitCode write_error_code(int error);

// Why `path` cannot be read as a regular file, as the rest of a message after
// "<path>: ": "no such file", "is a directory", "is not a regular file (a FIFO)",
// "is a symbolic link loop", or the system's reason; "" when it is a regular
// file (through symbolic links).
std::string not_a_regular_file(const std::filesystem::path& path);

}  // namespace gputrain
