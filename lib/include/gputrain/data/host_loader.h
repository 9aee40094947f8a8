#pragma once
// Batches of one split, assembled by worker threads into a bounded prefetch
// queue and delivered in order. The sample order depends only on the seed and
// the epoch, never on the number of workers.
#include <cstdint>
#include <memory>
#include <optional>

#include "gputrain/data/batch_loader.h"

namespace gputrain::data {

class HostLoader final : public BatchLoader {
 public:
  HostLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~HostLoader() override;  // stops and joins the workers
  HostLoader(const HostLoader&) = delete;
  HostLoader& operator=(const HostLoader&) = delete;

  void start_epoch(int64_t epoch, int64_t first_batch = 0) override;
  // An error in a worker is rethrown here as a DataError naming the data set,
  // file and sample (a failure that is not the data's, such as out of memory,
  // is rethrown as it is), in batch order; the epoch then ends and the workers
  // are joined.
  std::optional<Batch> next() override;
  // Stops the workers mid-epoch (error, signal, early exit) without deadlock.
  void stop() override;

  int64_t batches_per_epoch() const override;
  const DatasetInfo& info() const override;
  double wait_seconds() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::data
