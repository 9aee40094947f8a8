#pragma once
// What every batch source agrees on, so that HostLoader (host workers) and
// DeviceLoader (on the training device) deliver the same samples, augmented
// the same way, for the same seed and epoch: the checked options, the sample
// order of an epoch, the augmentation draws of a batch and the normalisation.
#include <cstdint>
#include <vector>

#include "gputrain/data/host_loader.h"
#include "gputrain/data/pixel_map.h"
#include "images/image_ops.h"

namespace gputrain::data::detail {

// Where one output image reads from: a crop offset in [-pad, pad] per axis
// (what torchvision's RandomCrop(padding=pad) picks) and a mirror.
struct Placement {
  int64_t dy = 0;
  int64_t dx = 0;
  bool flip = false;
};

// Checks `options` (its batching, then its image pipeline against the data
// set; ConfigErrors name the data.* key) and returns the per-channel maps: one
// per channel for images, none for features.
std::vector<ChannelMap> checked_channel_maps(const LoaderOptions& options, const DatasetInfo& info);

// The sample order of epoch `epoch` (0-based): the file order, or a
// Fisher-Yates shuffle seeded by the seed and the epoch alone.
std::vector<int64_t> epoch_order(const Batching& batching, int64_t samples, int64_t epoch);

// The augmentation of batch `index` of `epoch`, one placement per sample; all
// zero when augmentation is off. With alternating_flip the flips are not drawn
// here (they belong to samples, not batch positions: alternating_flip()). The draws depend on `seed`
// (Batching::seed), the epoch and the batch index only, never on who makes the batch.
std::vector<Placement> draw_placements(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                       int64_t count);

// data.augment.random_resized_crop: the box of each of the `count` samples of
// batch `index` of `epoch` in images of `height` x `width`; empty when it is
// off. Each sample draws from its own stream (seed, epoch, batch, position), so
// a box never depends on how many tries another sample took.
std::vector<CropBox> draw_crop_boxes(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                     int64_t count, int64_t height, int64_t width);

// The box of sample `position` of batch `index` alone, in an image of its own
// `height` x `width` (a file read at its stored size): the same stream as
// draw_crop_boxes' for that position.
CropBox draw_crop_box(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index, int64_t position,
                      int64_t height, int64_t width);

// data.augment.color_jitter: the draw of each of the `count` samples of batch
// `index` of `epoch`, each from its own stream as draw_crop_boxes'; empty when it is off.
std::vector<JitterDraw> draw_color_jitters(const ImagePipeline& images, uint64_t seed, int64_t epoch, int64_t index,
                                           int64_t count);

// The per-image ops of data.augment, in their order, on uint8 [C, H, W]
// `image`: the resized crop to `box` (when `boxes` holds the batch's), then
// the colour jitter (when `jitters` does); sample `i` of the batch. Returns
// `image` itself when neither is on.
torch::Tensor augment_image(torch::Tensor image, const std::vector<CropBox>& boxes,
                            const std::vector<JitterDraw>& jitters, std::size_t i);

// data.augment.alternating_flip: whether sample `row` is mirrored in `epoch`.
// A bit per sample drawn from `seed` (Batching::seed) picks the half mirrored
// in even epochs; odd epochs mirror the other half.
bool alternating_flip(uint64_t seed, int64_t row, int64_t epoch);

// Where a crop reads position `i` of an axis of `size` when it falls outside
// (data.augment.reflect): the edge mirrored, without repeating it (-1 -> 1,
// size -> size - 2), as torch's reflection padding does.
inline int64_t reflected(int64_t i, int64_t size) { return i < 0 ? -i : i >= size ? 2 * size - 2 - i : i; }

// A DataError naming sample `row` of `dataset`, whose label is out of range.
[[noreturn]] void throw_bad_label(const Dataset& dataset, int64_t row, int64_t label);

}  // namespace gputrain::data::detail
