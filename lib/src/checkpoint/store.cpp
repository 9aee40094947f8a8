#include "gputrain/checkpoint/store.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <regex>
#include <thread>
#include <tuple>

#include "gputrain/common/error.h"

namespace gputrain::checkpoint {

namespace fs = std::filesystem;

namespace {

// (step, epochs done, batch) from a checkpoint's file name.
std::optional<std::tuple<int64_t, int64_t, int64_t>> position_key(const fs::path& path) {
  static const std::regex kName(R"(ckpt-s(\d+)-e(\d+)-b(\d+)\.ckpt)");
  std::smatch m;
  const std::string name = path.filename().string();
  if (!std::regex_match(name, m, kName)) return std::nullopt;
  return std::make_tuple(std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]));
}

bool has_entries(const fs::path& dir) {
  std::error_code error;
  return fs::is_directory(dir, error) && !fs::is_empty(dir, error);
}

// The first entry of `dir` that is not a gputrain checkpoint; "" when it holds only checkpoints.
std::string foreign_entry(const fs::path& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool left_by_a_write = name.rfind('.', 0) == 0 && name.find(kAtomicTemporaryMark) != std::string::npos;
    const bool checkpoint = entry.is_regular_file(error) && !entry.is_symlink(error) &&
                            (position_key(entry.path()) || name == CheckpointStore::kBestName || left_by_a_write);
    if (!checkpoint) return name;
  }
  return "";
}

}  // namespace

void check_checkpoint_dir(const fs::path& dir) {
  if (!has_entries(dir)) return;
  if (const std::string other = foreign_entry(dir); !other.empty()) {
    throw UserError(
        fmt::format("{}: holds '{}', which is not a gputrain checkpoint, so it is not a checkpoint "
                    "directory this run may move aside. Move it away or choose another checkpoint.dir",
                    dir.string(), other));
  }
}

namespace {

// <dir> -> <dir>.N, the first N free. Only a directory of checkpoints is
// moved: anything else in it is not ours to move.
fs::path move_aside(const fs::path& dir) {
  check_checkpoint_dir(dir);
  int n = 1;
  while (fs::exists(fs::path(dir.string() + "." + std::to_string(n)))) ++n;
  const fs::path target(dir.string() + "." + std::to_string(n));
  std::error_code error;
  fs::rename(dir, target, error);
  if (error) {
    throw UserError(fmt::format("{}: cannot move the checkpoints of another run aside to {}: {}", dir.string(),
                                target.string(), error.message()));
  }
  return target;
}

}  // namespace

CheckpointStore::CheckpointStore(fs::path dir, int64_t keep, std::optional<Position> resumed_from, WriteHooks hooks)
    : dir_(std::move(dir)), keep_(keep), hooks_(std::move(hooks)) {
  std::error_code error;
  if (fs::is_directory(dir_, error)) {
    for (const auto& entry : fs::directory_iterator(dir_, error)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind('.', 0) == 0 && name.find(kAtomicTemporaryMark) != std::string::npos) {
        spdlog::info("removing {}, left by a checkpoint write that did not finish", entry.path().string());
        fs::remove(entry.path(), error);
      }
    }
  }
  bool other_timeline = !resumed_from && has_entries(dir_);
  if (resumed_from) {
    const auto resumed = std::make_tuple(resumed_from->step, resumed_from->epoch, resumed_from->batch);
    for (const fs::path& path : list_checkpoints(dir_)) other_timeline |= *position_key(path) > resumed;
  }
  if (!other_timeline) return;
  const fs::path moved = move_aside(dir_);
  if (resumed_from) {
    spdlog::warn(
        "{} held checkpoints newer than the one this run resumes from; moved them to {} so that the two "
        "timelines do not mix",
        dir_.string(), moved.string());
  } else {
    spdlog::warn("{} held the checkpoints of an earlier run; moved them to {} (resume one with --resume PATH)",
                 dir_.string(), moved.string());
  }
}

std::string CheckpointStore::file_name(const Position& at) {
  return fmt::format("ckpt-s{:08}-e{:04}-b{:06}.ckpt", at.step, at.epoch, at.batch);
}

void CheckpointStore::write(const fs::path& path, std::string_view bytes) const {
  try {
    write_atomically(path, bytes, hooks_);
  } catch (const Error& e) {
    const std::vector<fs::path> written = list_checkpoints(dir_);
    throw Error(e.code(), fmt::format("{}; the run stops here: make room (or fix the cause), then continue it with "
                                      "--resume auto, {}",
                                      e.what(),
                                      written.empty() ? std::string("which starts it again (no checkpoint was written)")
                                                      : "from " + written.back().string()));
  }
}

fs::path CheckpointStore::save(const Position& at, std::string_view bytes) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error)
    throw Error(ExitCode::kRuntime, fmt::format("{}: cannot create the directory: {}", dir_.string(), error.message()));
  const fs::path path = dir_ / file_name(at);
  write(path, bytes);
  std::vector<fs::path> all = list_checkpoints(dir_);
  all.erase(std::remove(all.begin(), all.end(), path), all.end());
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep_) < all.size() + 1; ++i) fs::remove(all[i], error);
  return path;
}

fs::path CheckpointStore::save_best(std::string_view bytes) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error)
    throw Error(ExitCode::kRuntime, fmt::format("{}: cannot create the directory: {}", dir_.string(), error.message()));
  const fs::path path = dir_ / kBestName;
  write(path, bytes);
  return path;
}

std::vector<fs::path> list_checkpoints(const fs::path& dir) {
  std::vector<fs::path> found;
  std::error_code error;
  if (!fs::is_directory(dir, error)) return found;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && position_key(entry.path())) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end(),
            [](const fs::path& a, const fs::path& b) { return *position_key(a) < *position_key(b); });
  return found;
}

std::optional<Checkpoint> newest_valid(const fs::path& dir) {
  std::vector<fs::path> candidates = list_checkpoints(dir);
  std::reverse(candidates.begin(), candidates.end());
  std::error_code error;
  if (fs::is_regular_file(dir / CheckpointStore::kBestName, error))
    candidates.push_back(dir / CheckpointStore::kBestName);
  if (candidates.empty()) return std::nullopt;
  for (const fs::path& path : candidates) {
    try {
      return Checkpoint::read(path);
    } catch (const CheckpointError& e) {
      spdlog::warn("skipping a damaged checkpoint: {}", e.what());
    }
  }
  throw CheckpointError(
      fmt::format("{}: none of its {} checkpoints is intact (see the warnings above); resume from "
                  "another file with --resume PATH, or train afresh without --resume",
                  dir.string(), candidates.size()));
}

}  // namespace gputrain::checkpoint
