#pragma once
// data.device_cache: the whole split resident on the training device (images
// as uint8, a quarter of their float size), with batches gathered,
// augmented and normalised there by tensor ops. No host loader runs in the
// loop; each batch costs a handful of kernel launches and one small copy of
// its augmentation draws. Same samples, order and augmentation as HostLoader.
#include <memory>
#include <optional>

#include "gputrain/data/batch_loader.h"

namespace gputrain::data {

class DeviceLoader final : public BatchLoader {
 public:
  // Copies the split to `device` once. Labels are checked here, all at once,
  // since no batch looks at them on the host again. num_workers, prefetch and
  // pin_memory do not apply and are ignored.
  DeviceLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device);
  ~DeviceLoader() override;

  void start_epoch(int64_t epoch, int64_t first_batch = 0) override;
  std::optional<Batch> next() override;
  void stop() override;

  int64_t batches_per_epoch() const override;
  const DatasetInfo& info() const override;
  double wait_seconds() const override { return 0.0; }  // batches are made on demand, never waited for

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::data
