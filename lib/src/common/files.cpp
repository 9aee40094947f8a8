#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "gputrain/common/error.h"

namespace gputrain {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void write_failed(const fs::path& path, int error) {
  throw Error(write_error_code(error), fmt::format("{}: cannot write: {}; the previous file, if any, is unchanged",
                                                   path.string(), std::strerror(error)));
}

// Writes all of `bytes`, retrying short writes and EINTR.
void write_all(int fd, std::string_view bytes, const WriteHooks& hooks, const fs::path& path) {
  std::size_t from = 0;
  while (from < bytes.size()) {
    const ssize_t n = hooks.write ? hooks.write(fd, bytes.data() + from, bytes.size() - from)
                                  : ::write(fd, bytes.data() + from, bytes.size() - from);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) write_failed(path, n < 0 ? errno : ENOSPC);  // 0 bytes: no progress, as good as full
    from += static_cast<std::size_t>(n);
  }
}

// Whether process `pid` runs on this machine (signal 0 checks without sending).
bool running(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// ".<name>.tmp-", to which a write adds "<pid>-<n>". A name may take all of a
// file name's 255 bytes, which would leave the temporary's no room (the write
// failed with "File name too long"), so a long one is cut to fit.
std::string temporary_prefix(const fs::path& path) {
  constexpr std::size_t kLongestName = 255 - 1 - 5 - 21;  // less '.', the mark and "<pid>-<n>" (at most 10 + 1 + 10)
  std::string name = path.filename().string();
  if (name.size() > kLongestName) name.resize(kLongestName);
  return "." + name + kAtomicTemporaryMark;
}

// Removes the temporary files of `path` that writes killed part-way left
// beside it (".<name>.tmp-<pid>-<n>" of a process that has ended): a killed
// export of a large model leaves one as large as the model. Those of running
// processes, this one's included, are writes still under way.
void remove_stale_temporaries(const fs::path& dir, const fs::path& path) {
  const std::string prefix = temporary_prefix(path);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>-<n>"
    const std::size_t dash = rest.find('-');
    const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
    if (dash == 0 || dash > 9 || !std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dash), digit)) {
      continue;  // not a pid: not ours
    }
    const auto pid = static_cast<pid_t>(std::stoll(rest.substr(0, dash)));
    if (pid == ::getpid() || running(pid)) continue;
    std::error_code removed;
    if (fs::remove(entry.path(), removed)) {
      spdlog::info("removed {}, left by a write of {} that did not finish (process {} has ended)",
                   entry.path().string(), path.string(), pid);
    }
  }
}

}  // namespace

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    // The rename is done; only its durability across a power cut is in doubt.
    spdlog::warn("{}: cannot fsync the directory ({})", dir.string(), std::strerror(errno));
  }
  if (fd >= 0) ::close(fd);
}

ExitCode write_error_code(int error) {
  switch (error) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EROFS:
    case EACCES:
    case EPERM:
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
      return ExitCode::kUserInput;
    default:
      return ExitCode::kRuntime;
  }
}

namespace {

// `path`'s content, written in full and fsync'ed to a temporary file beside
// it, which is returned; on failure the temporary is removed and an Error says why.
fs::path write_temporary(const fs::path& path, const std::function<void(const ByteSink&)>& produce,
                         const WriteHooks& hooks) {
  // rename() would replace a device such as /dev/full or a FIFO by a regular file.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    throw UserError(fmt::format("{}: {}; give the path of a file to write", path.string(), not_a_regular_file(path)));
  }
  static std::atomic<int> counter{0};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  remove_stale_temporaries(dir, path);
  const fs::path temporary = dir / fmt::format("{}{}-{}", temporary_prefix(path), ::getpid(), counter++);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) write_failed(path, errno);
  try {
    produce([&](std::string_view piece) { write_all(fd, piece, hooks, path); });
    if (::fsync(fd) != 0) write_failed(path, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    write_failed(path, error);
  }
  return temporary;
}

// Puts the written `temporary` in `path`'s place.
void rename_into_place(const fs::path& temporary, const fs::path& path) {
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    write_failed(path, error);
  }
  sync_directory(path.has_parent_path() ? path.parent_path() : fs::path("."));
}

// `bytes` for the sink, with the test hook's pause half-way.
std::function<void(const ByteSink&)> whole(const fs::path& path, std::string_view bytes, const WriteHooks& hooks) {
  return [&path, bytes, &hooks](const ByteSink& sink) {
    if (hooks.pause_mid_write_s <= 0) return sink(bytes);
    sink(bytes.substr(0, bytes.size() / 2));
    spdlog::warn("test hook: pausing {} s in the middle of writing {}", hooks.pause_mid_write_s, path.string());
    std::this_thread::sleep_for(std::chrono::duration<double>(hooks.pause_mid_write_s));
    sink(bytes.substr(bytes.size() / 2));
  };
}

}  // namespace

void write_atomically_in_pieces(const fs::path& path, const std::function<void(const ByteSink&)>& produce,
                                const WriteHooks& hooks) {
  rename_into_place(write_temporary(path, produce, hooks), path);
}

void write_atomically(const fs::path& path, std::string_view bytes, const WriteHooks& hooks) {
  write_atomically_in_pieces(path, whole(path, bytes, hooks), hooks);
}

void write_atomically_together(const std::vector<FileBytes>& files, const WriteHooks& hooks) {
  std::vector<fs::path> temporaries;
  try {
    for (const FileBytes& file : files)
      temporaries.push_back(write_temporary(file.path, whole(file.path, file.bytes, hooks), hooks));
  } catch (...) {
    for (const fs::path& temporary : temporaries) ::unlink(temporary.c_str());
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    try {
      rename_into_place(temporaries[i], files[i].path);
    } catch (...) {
      for (std::size_t j = i + 1; j < files.size(); ++j) ::unlink(temporaries[j].c_str());
      throw;
    }
  }
}

std::string not_a_regular_file(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return "no such file";
    if (errno == ELOOP) return "is a symbolic link loop (too many levels of symbolic links)";
    return std::strerror(errno);
  }
  if (S_ISREG(info.st_mode)) return "";
  if (S_ISDIR(info.st_mode)) return "is a directory, not a file";
  const char* kind = S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISSOCK(info.st_mode) ? "a socket" : "a device";
  return fmt::format("is not a regular file ({})", kind);
}

namespace {

// Whether `path` lies inside the folder `dir`, symbolic links resolved in both.
bool inside(const fs::path& path, const fs::path& dir) {
  std::error_code error;
  const fs::path folder = fs::canonical(dir, error);
  if (error) return false;
  const fs::path file = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) return false;
  return std::mismatch(folder.begin(), folder.end(), file.begin(), file.end()).first == folder.end();
}

}  // namespace

void check_output_file(const fs::path& out, const std::vector<NamedPath>& inputs, bool force, std::string_view option) {
  if (out.empty()) throw UserError(fmt::format("{}: is empty; name the file to write", option));
  std::error_code error;
  for (const auto& [input_option, input] : inputs) {
    if (input.empty()) continue;
    if (fs::equivalent(out, input, error)) {
      throw UserError(
          fmt::format("{} {}: is the {} file itself ({}), which writing it would destroy; write to another file",
                      option, out.string(), input_option, input.string()));
    }
    if (fs::is_directory(input, error) && fs::exists(out, error) && inside(out, input)) {
      throw UserError(
          fmt::format("{} {}: lies inside {} ({}), whose files this command reads; an input is never an output, "
                      "--force or not: write to a file outside {}",
                      option, out.string(), input.string(), input_option, input.string()));
    }
  }
  // A directory or a device is never replaced: "add --force" would only lead to this refusal.
  if (fs::exists(out, error) && !fs::is_regular_file(out, error)) {
    throw UserError(
        fmt::format("{} {}: {}; give the path of a file to write", option, out.string(), not_a_regular_file(out)));
  }
  if (!force && fs::exists(out, error)) {
    throw UserError(
        fmt::format("{} {}: exists; add --force to replace it, or choose another {}", option, out.string(), option));
  }
}

}  // namespace gputrain
