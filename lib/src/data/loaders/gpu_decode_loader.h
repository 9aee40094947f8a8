#pragma once
// data.decode: gpu's loader: worker threads read each batch's files and draw
// its augmentation (read_encoded_batch) into a bounded prefetch queue, as
// HostLoader's workers make batches; next() decodes the batch's JPEGs with
// nvJPEG and makes the rest on the training device (fit_sample,
// finish_images), all on the caller's current CUDA stream, so the training
// step queued after it on that stream needs no synchronisation.
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "gputrain/data/batch_loader.h"
#include "images/nvjpeg_decoder.h"

namespace gputrain::data::detail {

// Decodes a batch's files to uint8 [C, H, W] tensors at their stored size, in order.
using DecodeImages = std::function<std::vector<torch::Tensor>(const std::vector<EncodedImage>&)>;

class GpuDecodeLoader final : public BatchLoader {
 public:
  // nvJPEG on `device` (CUDA): throws DataError when it cannot be loaded.
  GpuDecodeLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, torch::Device device);
  // The same with `decode` instead of nvJPEG (the CPU tests decode with libjpeg-turbo).
  GpuDecodeLoader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, DecodeImages decode);
  ~GpuDecodeLoader() override;  // stops and joins the workers
  GpuDecodeLoader(const GpuDecodeLoader&) = delete;
  GpuDecodeLoader& operator=(const GpuDecodeLoader&) = delete;

  void start_epoch(int64_t epoch, int64_t first_batch = 0) override;
  // A file that cannot be read or decoded is a DataError naming it, thrown
  // in batch order (a worker's when its batch is due); the epoch then ends
  // and the workers are joined.
  std::optional<Batch> next() override;
  void stop() override;

  int64_t batches_per_epoch() const override;
  const DatasetInfo& info() const override;
  double wait_seconds() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::data::detail
