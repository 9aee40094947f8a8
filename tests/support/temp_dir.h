#pragma once
#include <filesystem>
#include <string>

namespace gputrain::testing {

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "gputrain-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes `text` to `path` (creating parent directories) and returns the path.
std::filesystem::path write_text(const std::filesystem::path& path, const std::string& text);

// The bytes of `path`; "" when it cannot be read.
std::string read_text(const std::filesystem::path& path);

// Whether `dir` holds a write's temporary (".<name>.tmp-<pid>-<n>", common/files.h's write_atomically).
bool has_temporary(const std::filesystem::path& dir);

}  // namespace gputrain::testing
