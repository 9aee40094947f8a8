#pragma once
// Batches of one split, assembled by worker threads into a bounded prefetch
// queue and delivered in order. The sample order depends only on the seed and
// the epoch, never on the number of workers.
#include <cstdint>
#include <memory>
#include <optional>

#include "gputrain/data/batch_source.h"

namespace gputrain::data {

class BatchStream final : public BatchSource {
 public:
  BatchStream(std::shared_ptr<const Dataset> dataset, LoaderOptions options);
  ~BatchStream() override;  // stops and joins the workers
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  void start_epoch(int64_t epoch) override;
  // An error in a worker is rethrown here.
  std::optional<Batch> next() override;
  // Stops the workers mid-epoch without deadlock.
  void stop() override;

  int64_t batches_per_epoch() const override;
  const DatasetInfo& info() const override;
  double wait_seconds() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::data
