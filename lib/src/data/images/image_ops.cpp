#include "images/image_ops.h"

#include <ATen/Version.h>
#include <ATen/ops/constant_pad_nd.h>
#include <fmt/format.h>
#include <torch/nn/functional/upsampling.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "gputrain/common/error.h"

namespace gputrain::data::detail {

namespace {

// Python's round() of a non-negative value: half to even (std::nearbyint in the default rounding mode).
int64_t python_round(double value) { return static_cast<int64_t>(std::nearbyint(value)); }

}  // namespace

CropBox draw_resized_crop(SplitMix64& rng, int64_t height, int64_t width, const ResizedCrop& crop) {
  const double area = static_cast<double>(height * width);
  const double log_low = std::log(crop.ratio[0]), log_high = std::log(crop.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(crop.scale[0], crop.scale[1]);
    const double aspect = std::exp(rng.uniform(log_low, log_high));
    const int64_t w = python_round(std::sqrt(target_area * aspect));
    const int64_t h = python_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const auto top = static_cast<int64_t>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const auto left = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < crop.ratio[0]) {
    h = python_round(static_cast<double>(w) / crop.ratio[0]);
  } else if (in_ratio > crop.ratio[1]) {
    w = python_round(static_cast<double>(h) * crop.ratio[1]);
  }
  // torchvision's rounding leaves a side of 0 for a ratio bound past twice the
  // image's aspect ratio (ratio: [100, 1000] on 32x32), a box torchvision
  // itself then fails to resize; one pixel is the thinnest box there is.
  h = std::max<int64_t>(h, 1);
  w = std::max<int64_t>(w, 1);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

torch::Tensor resized_crop(const torch::Tensor& image, CropBox box, int64_t out_height, int64_t out_width) {
  GPUTRAIN_CHECK(image.dim() == 3 && image.scalar_type() == torch::kUInt8, "resized_crop takes uint8 [C, H, W]");
  GPUTRAIN_CHECK(box.top >= 0 && box.left >= 0 && box.height > 0 && box.width > 0 &&
                     box.top + box.height <= image.size(1) && box.left + box.width <= image.size(2),
                 "crop box ({}, {}) {}x{} outside a {}x{} image", box.top, box.left, box.height, box.width,
                 image.size(1), image.size(2));
  const torch::Tensor cropped = image.narrow(1, box.top, box.height).narrow(2, box.left, box.width);
  if (box.height == out_height && box.width == out_width) return cropped.contiguous();
  namespace F = torch::nn::functional;
  const auto options = F::InterpolateFuncOptions()
                           .size(std::vector<int64_t>{out_height, out_width})
                           .mode(torch::kBilinear)
                           .align_corners(false)
                           .antialias(true);
  if (image.is_cpu() && native_uint8_resize()) {
    // Pixels interleaved (channels last), as the fixed-point kernel reads them and as decoders write them.
    return F::interpolate(cropped.unsqueeze(0).contiguous(at::MemoryFormat::ChannelsLast), options)
        .squeeze(0)
        .contiguous();
  }
  return F::interpolate(cropped.unsqueeze(0).to(torch::kFloat32), options)
      .squeeze(0)
      .round_()
      .clamp_(0, 255)
      .to(torch::kUInt8)
      .contiguous();
}

bool native_uint8_resize() {
  static const bool avx = [] {
    const std::string capability = at::get_cpu_capability();
    return capability == "AVX2" || capability == "AVX512";
  }();
  return avx;
}

std::array<int64_t, 2> shorter_side_size(int64_t height, int64_t width, int64_t n) {
  const bool tall = width <= height;
  const int64_t shorter = tall ? width : height, longer = tall ? height : width;
  // int(n * long / short) in Python: the quotient in double, truncated.
  const auto scaled =
      static_cast<int64_t>(static_cast<double>(n) * static_cast<double>(longer) / static_cast<double>(shorter));
  return tall ? std::array<int64_t, 2>{scaled, n} : std::array<int64_t, 2>{n, scaled};
}

torch::Tensor center_crop(const torch::Tensor& image, int64_t out_height, int64_t out_width) {
  GPUTRAIN_CHECK(image.dim() == 3, "center_crop takes [C, H, W]");
  torch::Tensor x = image;
  if (out_height > x.size(1) || out_width > x.size(2)) {
    const int64_t dh = std::max<int64_t>(0, out_height - x.size(1)), dw = std::max<int64_t>(0, out_width - x.size(2));
    x = at::constant_pad_nd(x, {dw / 2, (dw + 1) / 2, dh / 2, (dh + 1) / 2}, 0);
  }
  const int64_t top = python_round(static_cast<double>(x.size(1) - out_height) / 2.0);
  const int64_t left = python_round(static_cast<double>(x.size(2) - out_width) / 2.0);
  return x.narrow(1, top, out_height).narrow(2, left, out_width).contiguous();
}

JitterDraw draw_color_jitter(SplitMix64& rng, const ColorJitter& jitter) {
  JitterDraw draw;
  for (std::size_t i = draw.order.size(); i > 1; --i) std::swap(draw.order[i - 1], draw.order[rng.below(i)]);
  const std::array<double, 4> ranges{jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue};
  for (std::size_t op = 0; op < 3; ++op) {
    if (ranges[op] > 0) draw.factor[op] = rng.uniform(std::max(0.0, 1.0 - ranges[op]), 1.0 + ranges[op]);
  }
  if (jitter.hue > 0) draw.factor[3] = rng.uniform(-jitter.hue, jitter.hue);
  return draw;
}

namespace {

// torchvision's _blend: ratio * a + (1 - ratio) * b in float32, clamped, truncated back to uint8.
torch::Tensor blend(const torch::Tensor& a, const torch::Tensor& b, double ratio) {
  return (a * ratio + b * (1.0 - ratio)).clamp(0, 255).to(torch::kUInt8);
}

// torchvision's rgb_to_grayscale of a uint8 [3, H, W]: [1, H, W], the luma truncated to uint8.
torch::Tensor grey(const torch::Tensor& image) {
  return (image[0] * 0.2989 + image[1] * 0.587 + image[2] * 0.114).to(torch::kUInt8).unsqueeze(0);
}

// torchvision's _rgb2hsv and _hsv2rgb, float32 [3, H, W] in [0, 1], term for term.
torch::Tensor rgb_to_hsv(const torch::Tensor& image) {
  const torch::Tensor r = image[0], g = image[1], b = image[2];
  const torch::Tensor maxc = std::get<0>(image.max(0)), minc = std::get<0>(image.min(0));
  const torch::Tensor eqc = maxc == minc;
  const torch::Tensor cr = maxc - minc;
  const torch::Tensor ones = torch::ones_like(maxc);
  const torch::Tensor s = cr / torch::where(eqc, ones, maxc);
  const torch::Tensor cr_divisor = torch::where(eqc, ones, cr);
  const torch::Tensor rc = (maxc - r) / cr_divisor, gc = (maxc - g) / cr_divisor, bc = (maxc - b) / cr_divisor;
  const torch::Tensor hr = (maxc == r) * (bc - gc);
  const torch::Tensor hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc);
  const torch::Tensor hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc);
  const torch::Tensor h = torch::fmod((hr + hg + hb) / 6.0 + 1.0, 1.0);
  return torch::stack({h, s, maxc});
}

torch::Tensor hsv_to_rgb(const torch::Tensor& image) {
  const torch::Tensor h = image[0], s = image[1], v = image[2];
  torch::Tensor i = torch::floor(h * 6.0);
  const torch::Tensor f = h * 6.0 - i;
  i = i.to(torch::kInt32);
  const torch::Tensor p = torch::clamp(v * (1.0 - s), 0.0, 1.0);
  const torch::Tensor q = torch::clamp(v * (1.0 - s * f), 0.0, 1.0);
  const torch::Tensor t = torch::clamp(v * (1.0 - s * (1.0 - f)), 0.0, 1.0);
  i = i.remainder(6);
  const torch::Tensor mask = i.unsqueeze(0) == torch::arange(6, i.options().dtype(torch::kInt64)).view({-1, 1, 1});
  const torch::Tensor a1 = torch::stack({v, q, p, p, t, v});
  const torch::Tensor a2 = torch::stack({t, v, v, q, p, p});
  const torch::Tensor a3 = torch::stack({p, p, t, v, v, q});
  const torch::Tensor a4 = torch::stack({a1, a2, a3});
  return torch::einsum("ijk,xijk->xjk", {mask.to(image.scalar_type()), a4});
}

}  // namespace

torch::Tensor adjust_brightness(const torch::Tensor& image, double factor) {
  return blend(image, torch::zeros_like(image), factor);
}

torch::Tensor adjust_contrast(const torch::Tensor& image, double factor) {
  const torch::Tensor luma = image.size(0) == 3 ? grey(image) : image;
  return blend(image, luma.to(torch::kFloat32).mean({-3, -2, -1}, /*keepdim=*/true), factor);
}

torch::Tensor adjust_saturation(const torch::Tensor& image, double factor) {
  if (image.size(0) == 1) return image;
  return blend(image, grey(image), factor);
}

torch::Tensor adjust_hue(const torch::Tensor& image, double factor) {
  if (image.size(0) == 1) return image;
  torch::Tensor hsv = rgb_to_hsv(image.to(torch::kFloat32) / 255.0);
  hsv = torch::stack({torch::remainder(hsv[0] + factor, 1.0), hsv[1], hsv[2]});
  // convert_image_dtype(float32 -> uint8): times 256 - 1e-3, truncated.
  return hsv_to_rgb(hsv).mul(255.0 + 1.0 - 1e-3).to(torch::kUInt8);
}

torch::Tensor color_jitter(torch::Tensor image, const JitterDraw& draw) {
  using Op = torch::Tensor (*)(const torch::Tensor&, double);
  constexpr std::array<Op, 4> ops{adjust_brightness, adjust_contrast, adjust_saturation, adjust_hue};
  for (const int op : draw.order) {
    const auto k = static_cast<std::size_t>(op);
    if (draw.factor[k]) image = ops[k](image, *draw.factor[k]);
  }
  return image;
}

}  // namespace gputrain::data::detail
