#pragma once
// torchvision's image transforms, each split into the draw (random numbers ->
// parameters) and the deterministic op (parameters -> pixels), so that the
// op can be checked pixel for pixel against torchvision for given parameters
// (tests/data/image_ops_test.cpp) and the draw on its own.
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <optional>

#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "loaders/rng.h"

namespace gputrain::data::detail {

using data::CropBox;

// torchvision's RandomResizedCrop.get_params for an image of `height` x
// `width`: up to 10 tries of an area share uniform in `crop.scale` and an
// aspect ratio (width / height) log-uniform in `crop.ratio`, the box's sides
// rounded half to even as Python's round(); the first that fits is placed
// uniformly. Else the centre crop of the image clamped to the ratio bounds,
// each side at least 1 pixel (where torchvision's rounding makes it 0).
CropBox draw_resized_crop(SplitMix64& rng, int64_t height, int64_t width, const ResizedCrop& crop);

// torchvision.transforms.v2's F.resized_crop(image, box..., [out_height,
// out_width], BILINEAR, antialias=True) on a uint8 [C, H, W] tensor (any
// device), by its rule: on a CPU with AVX2 (native_uint8_resize()) torch's
// fixed-point uint8 kernel, 8 times faster there; elsewhere in float32, rounded
// back to uint8 (v1's tensor path everywhere). The two differ by at most 1.
// `box` must lie inside the image.
torch::Tensor resized_crop(const torch::Tensor& image, CropBox box, int64_t out_height, int64_t out_width);

// Whether this CPU resizes uint8 images natively (AVX2 or AVX-512), as
// torchvision.transforms.v2 decides it.
bool native_uint8_resize();

// The size torchvision's Resize(n) gives an image of `height` x `width`: the
// shorter side n, the longer one in proportion, rounded down. {height, width}.
std::array<int64_t, 2> shorter_side_size(int64_t height, int64_t width, int64_t n);

// torchvision's F.center_crop(image, [out_height, out_width]) on uint8 [C, H, W]:
// the middle (its offset rounded half to even, as Python's round()), zero-padded
// where the image is smaller.
torch::Tensor center_crop(const torch::Tensor& image, int64_t out_height, int64_t out_width);

// One image's draw of torchvision's ColorJitter: the order of its four ops
// (0 brightness, 1 contrast, 2 saturation, 3 hue) and their factors; an op
// whose range is 0 has no factor and is skipped.
struct JitterDraw {
  std::array<int, 4> order{0, 1, 2, 3};
  std::array<std::optional<double>, 4> factor;
};

// ColorJitter.get_params: a random order of the four ops (a Fisher-Yates
// shuffle) and each factor uniform in its range: [max(0, 1 - x), 1 + x] for
// brightness, contrast and saturation, [-hue, hue] for hue.
JitterDraw draw_color_jitter(SplitMix64& rng, const ColorJitter& jitter);

// torchvision's F.adjust_brightness / _contrast / _saturation / _hue on a
// uint8 [C, H, W] tensor (C 1 or 3), as its tensor path computes them: float32
// blends cast back by truncation, hue through HSV; saturation and hue leave
// greyscale images as they are.
torch::Tensor adjust_brightness(const torch::Tensor& image, double factor);
torch::Tensor adjust_contrast(const torch::Tensor& image, double factor);
torch::Tensor adjust_saturation(const torch::Tensor& image, double factor);
torch::Tensor adjust_hue(const torch::Tensor& image, double factor);

// ColorJitter's forward for `draw`: its ops in its order.
torch::Tensor color_jitter(torch::Tensor image, const JitterDraw& draw);

}  // namespace gputrain::data::detail
