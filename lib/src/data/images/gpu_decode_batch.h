#pragma once
// data.decode: gpu's batch in two halves: what host threads read for it (each
// file's bytes and header, and the augmentation drawn for it on its stored
// size), and what the device makes of the decoded images (the resized crop
// or data.resize / data.center_crop, colour jitter, crop and flip,
// normalisation). Neither half needs CUDA: the ops are LibTorch's on any
// device, so the CPU tests check both against HostLoader.
#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "images/image_files.h"
#include "images/nvjpeg_decoder.h"
#include "loaders/batch_plan.h"

namespace gputrain::data::detail {

// One sample of the batch as read on the host.
struct EncodedSample {
  int64_t row = 0;                   // in the data set
  EncodedImage image;                // the file's name and bytes
  ImageShape stored;                 // its header's channels, height and width
  std::optional<CropBox> box;        // data.augment.random_resized_crop's, in the stored image
  std::optional<JitterDraw> jitter;  // data.augment.color_jitter's
  Placement placement;               // data.augment.random_crop's offset and the flip (alternating_flip's too)
};

struct EncodedBatch {
  int64_t index = 0;  // in the epoch
  int64_t whole = 0;  // rows of the whole batch, of which `samples` are this process's (Batching::shard)
  std::vector<EncodedSample> samples;
};

// This process's rows of batch `index` of `epoch` in `order` (epoch_order's):
// `files[row]` read and its header checked against `max_pixels`
// (data.max_image_pixels), each augmentation drawn as HostLoader draws it for
// that position of the batch, the resized crop by draw_crop_box on the file's
// own stored size. A file that cannot be read is a DataError naming it.
EncodedBatch read_encoded_batch(const LoaderOptions& options, const std::vector<int64_t>& order, int64_t epoch,
                                int64_t index, const std::vector<std::filesystem::path>& files, int64_t max_pixels);

// `decoded`, sample's uint8 [C, H', W'] pixels at their stored size (any
// device), brought to the split's `shape`: its resized crop to shape's size
// and colour jitter when drawn, else `fit` (data.resize, data.center_crop or
// data.image_size) as image_folder decodes a file.
torch::Tensor fit_sample(const torch::Tensor& decoded, const EncodedSample& sample, const ImageFit& fit,
                         ImageShape shape);

// The batch's float32 [B, C, H, W] from its fitted images (on one device):
// data.augment.random_crop's zero-padded crop and the flip of each
// placement, then `maps`' normalisation, as HostLoader writes them.
torch::Tensor finish_images(const std::vector<torch::Tensor>& fitted, const EncodedBatch& batch,
                            const ImagePipeline& images, const std::vector<ChannelMap>& maps);

}  // namespace gputrain::data::detail
