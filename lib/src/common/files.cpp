#include "gputrain/common/files.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gputrain/common/error.h"

namespace gputrain {

void write_file_atomically(const std::string& path, std::string_view bytes, std::string_view what) {
  const std::string temporary = path + ".tmp";
  // stdio rather than streams: each failing call leaves the reason in errno.
  std::FILE* file = std::fopen(temporary.c_str(), "wb");
  bool ok = file != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  int error = errno;
  if (file != nullptr && std::fclose(file) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (ok) return;
  std::remove(temporary.c_str());
  throw Error(ExitCode::kRuntime, fmt::format("{}: cannot write the {}: {}", path, what, std::strerror(error)));
}

}  // namespace gputrain
