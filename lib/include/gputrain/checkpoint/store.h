#pragma once
// A run's checkpoint directory: atomic writes, names that sort by progress,
// rotation to the newest checkpoint.keep plus the best, and finding the newest
// valid one to resume from.
#include <sys/types.h>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/common/files.h"

namespace gputrain::checkpoint {

// Throws UserError (exit 2) when `dir` holds anything but gputrain checkpoints
// (ckpt-*.ckpt, best.ckpt): a run moves a checkpoint directory aside, and
// never one that holds other files. Nothing to check when it is missing or empty.
void check_checkpoint_dir(const std::filesystem::path& dir);

class CheckpointStore {
 public:
  // Checkpoints in `dir` (created on the first save), keeping the newest
  // `keep`. Removes temporary files a killed writer left behind. Checkpoints
  // of another timeline are moved to <dir>.1 (.2, ...), so that rotation and
  // --resume auto never mix two: all of them for a fresh run (`resumed_from`
  // nullopt), those newer than `resumed_from` for a resumed one.
  CheckpointStore(std::filesystem::path dir, int64_t keep, std::optional<Position> resumed_from, WriteHooks hooks = {});

  // Writes the checkpoint of `at`, then deletes all but the newest `keep`.
  // Returns its path.
  std::filesystem::path save(const Position& at, std::string_view bytes);
  // Writes best.ckpt, which rotation never deletes.
  std::filesystem::path save_best(std::string_view bytes);

  const std::filesystem::path& dir() const { return dir_; }

  // "ckpt-s<step>-e<epochs done>-b<micro-batches into the next epoch>.ckpt",
  // zero-padded so that names sort like positions.
  static std::string file_name(const Position& at);
  static constexpr const char* kBestName = "best.ckpt";

 private:
  // write_atomically; its failure (a full disk) says how the run goes on.
  void write(const std::filesystem::path& path, std::string_view bytes) const;

  std::filesystem::path dir_;
  int64_t keep_;
  WriteHooks hooks_;
};

// The regular checkpoints in `dir` (not best.ckpt), oldest first.
std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir);

// The newest checkpoint in `dir` that reads back intact, skipping (with a
// warning) newer ones that do not; best.ckpt is the last resort. nullopt when
// `dir` holds no checkpoint; CheckpointError when it holds some and none is valid.
std::optional<Checkpoint> newest_valid(const std::filesystem::path& dir);

}  // namespace gputrain::checkpoint
