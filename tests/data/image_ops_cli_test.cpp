// gputrain's image ops against torchvision's for the same parameters (a crop
// box, a size, a jitter factor), pixel for pixel: tests/data/torchvision_ops.py
// applies torchvision.transforms.functional (v1) and .v2.functional (v2) to the
// same uint8 images in the venv's Python (one run for every case: importing
// torchvision takes seconds).
//
// Tolerance, uint8: the jitter ops equal v1 exactly: its tensor path blends
// in float32 with the same libtorch kernels, truncated back; v2 rounds its
// blends, within 1. The resizes follow v2's rule (on an AVX2 CPU torch's
// fixed-point uint8 kernel, else float32 rounded back, as v1 always does), so
// they equal the version whose path they take and stay within 1 of the other.
// Any difference beyond is a different formula.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "images/image_files.h"
#include "images/image_ops.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string op;      // which of gputrain's ops, for the report
  std::size_t image;   // index into the images
  std::string steps;   // torchvision's ops, JSON, for torchvision_ops.py
  torch::Tensor ours;  // gputrain's uint8 pixels
};

// torchvision's pixels (v1, v2) for each case, or nullopt without torch or torchvision in the venv.
std::optional<std::vector<std::array<torch::Tensor, 2>>> torchvision_pixels(const std::vector<torch::Tensor>& images,
                                                                            const std::vector<Case>& cases,
                                                                            const testing::TempDir& dir) {
  std::vector<std::string> shapes, specs;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const torch::Tensor image = images[i].contiguous();
    shapes.push_back(fmt::format("[{}]", fmt::join(image.sizes(), ", ")));
    testing::write_text(dir / fmt::format("image_{}.bin", i),
                        std::string(reinterpret_cast<const char*>(image.const_data_ptr<uint8_t>()),
                                    static_cast<std::size_t>(image.numel())));
  }
  for (const Case& c : cases) specs.push_back(fmt::format(R"({{"image": {}, "ops": {}}})", c.image, c.steps));
  testing::write_text(dir / "cases.json", fmt::format(R"({{"images": [{}], "cases": [{}]}})", fmt::join(shapes, ", "),
                                                      fmt::join(specs, ", ")));
  const fs::path python = testing::venv_python();
  if (!fs::exists(python)) return std::nullopt;
  testing::GputrainProcess child({std::string(testing::kSourceDir) + "/tests/data/torchvision_ops.py", dir.path()},
                                 {{"OMP_NUM_THREADS", "1"}}, dir.path().string(), {}, python.string());
  const testing::ProcessResult r = child.wait();
  if (r.exit_code == 3) return std::nullopt;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::array<torch::Tensor, 2>> pixels;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    std::array<torch::Tensor, 2> both;
    for (std::size_t v = 0; v < 2; ++v) {
      const std::string bytes = testing::read_text(dir / fmt::format("v{}_{}.bin", v + 1, k));
      both[v] = torch::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, torch::kUInt8)
                    .clone();
    }
    pixels.push_back(both);
  }
  return pixels;
}

// A seeded image with smooth and sharp parts: random noise over a gradient.
torch::Tensor test_image(int64_t channels, int64_t height, int64_t width) {
  torch::manual_seed(21);
  const torch::Tensor gradient = torch::linspace(0, 255, width).view({1, 1, width}).expand({channels, height, width});
  return (gradient * 0.5 + torch::randint(0, 128, {channels, height, width}).to(torch::kFloat32))
      .clamp(0, 255)
      .to(torch::kUInt8);
}

// RandomResizedCrop's op for given boxes: boxes that shrink (antialiasing
// matters), grow, change the aspect, are one pixel thin, or are the whole image.
void add_resized_crops(const torch::Tensor& image, std::size_t index, std::vector<Case>& cases) {
  for (const auto& [box, out] : std::vector<std::pair<detail::CropBox, std::array<int64_t, 2>>>{
           {{0, 0, 37, 53}, {16, 16}},
           {{3, 5, 30, 40}, {24, 24}},
           {{10, 20, 7, 9}, {32, 32}},
           {{1, 2, 35, 1}, {8, 8}},
           {{0, 0, 37, 53}, {37, 53}},
           {{5, 7, 20, 25}, {11, 29}},
       }) {
    cases.push_back({"resized_crop", index,
                     fmt::format(R"([{{"op": "resized_crop", "box": [{}, {}, {}, {}], "size": [{}, {}]}}])", box.top,
                                 box.left, box.height, box.width, out[0], out[1]),
                     detail::resized_crop(image, box, out[0], out[1])});
  }
}

// data.resize and data.center_crop as image_folder decodes a PNG of `image`
// (lossless: the decoded pixels are the image's), against Resize(n) then
// CenterCrop: shrinking and growing, crops smaller and larger than the
// resized image (zero padding), odd margins (the offset rounded half to
// even), and resize alone (the longer side rounded down).
void add_resizes_and_centre_crops(const torch::Tensor& image, std::size_t index, const fs::path& dir,
                                  std::vector<Case>& cases) {
  const int64_t height = image.size(1), width = image.size(2);
  const fs::path png = dir / fmt::format("{}x{}.png", width, height);
  testing::write_text(png, detail::encode_png(image.const_data_ptr<uint8_t>(), {3, height, width}));
  const auto decoded = [&](int64_t shorter, bool crop, int64_t h, int64_t w) {
    detail::ImageFit fit;
    fit.shorter_side = shorter;
    fit.center_crop = crop;
    torch::Tensor ours = torch::empty({3, h, w}, torch::kUInt8);
    detail::decode_image(png, {3, h, w}, fit, 1 << 20, ours.data_ptr<uint8_t>());
    return ours;
  };
  for (const auto& [shorter, crop] : std::vector<std::pair<int64_t, std::array<int64_t, 2>>>{
           {16, {16, 16}}, {30, {24, 24}}, {64, {60, 50}}, {20, {25, 33}}, {19, {14, 9}}, {0, {21, 18}}}) {
    const std::string resize = shorter > 0 ? fmt::format(R"({{"op": "resize", "size": {}}}, )", shorter) : "";
    cases.push_back({"resize, center_crop", index,
                     fmt::format(R"([{}{{"op": "center_crop", "size": [{}, {}]}}])", resize, crop[0], crop[1]),
                     decoded(shorter, true, crop[0], crop[1])});
  }
  detail::ImageFit resize_only;
  resize_only.shorter_side = 17;
  const auto [h, w] = detail::fitted_size({3, height, width}, resize_only, {});
  cases.push_back({"resize, center_crop", index, R"([{"op": "resize", "size": 17}])", decoded(17, false, h, w)});
}

// ColorJitter's four ops for given factors (its draws aside), alone and in one
// drawn order: hue across the colour circle's wrap, factors that darken and
// brighten, desaturate and oversaturate.
void add_color_jitters(const torch::Tensor& image, std::size_t index, std::vector<Case>& cases) {
  using Op = torch::Tensor (*)(const torch::Tensor&, double);
  const std::vector<std::tuple<std::string, Op, double>> ops{{"brightness", detail::adjust_brightness, 0.6},
                                                             {"brightness", detail::adjust_brightness, 1.37},
                                                             {"contrast", detail::adjust_contrast, 0.45},
                                                             {"contrast", detail::adjust_contrast, 1.8},
                                                             {"saturation", detail::adjust_saturation, 0.0},
                                                             {"saturation", detail::adjust_saturation, 1.6},
                                                             {"hue", detail::adjust_hue, -0.5},
                                                             {"hue", detail::adjust_hue, -0.13},
                                                             {"hue", detail::adjust_hue, 0.07},
                                                             {"hue", detail::adjust_hue, 0.5}};
  const std::string name = fmt::format("color_jitter, {} channel(s)", image.size(0));
  for (const auto& [op, apply, factor] : ops) {
    cases.push_back({name, index, fmt::format(R"([{{"op": "{}", "factor": {}}}])", op, factor), apply(image, factor)});
  }
  // The forward pass for one draw: hue, contrast, brightness, saturation.
  detail::JitterDraw draw;
  draw.order = {3, 1, 0, 2};
  draw.factor = {1.2, 0.7, 1.3, 0.2};
  cases.push_back({name, index,
                   R"([{"op": "hue", "factor": 0.2}, {"op": "contrast", "factor": 0.7}, )"
                   R"({"op": "brightness", "factor": 1.2}, {"op": "saturation", "factor": 1.3}])",
                   detail::color_jitter(image, draw)});
}

TEST(TorchvisionOps, EachOpMatchesForGivenParameters) {
  testing::TempDir dir("torchvision-ops");
  const std::vector<torch::Tensor> images{test_image(3, 37, 53), test_image(3, 41, 22), test_image(1, 19, 23)};
  std::vector<Case> cases;
  add_resized_crops(images[0], 0, cases);
  add_resizes_and_centre_crops(images[0], 0, dir.path(), cases);
  add_resizes_and_centre_crops(images[1], 1, dir.path(), cases);
  add_color_jitters(images[1], 1, cases);
  add_color_jitters(images[2], 2, cases);
  const auto theirs = torchvision_pixels(images, cases, dir);
  if (!theirs) GTEST_SKIP() << "no torch or torchvision in " << testing::venv_python() << ": scripts/setup.sh";
  std::map<std::string, std::array<int, 2>> largest;  // per op: v1, v2
  for (std::size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].steps);
    for (std::size_t v = 0; v < 2; ++v) {
      const torch::Tensor& tv = (*theirs)[k][v];
      ASSERT_EQ(tv.numel(), cases[k].ours.numel()) << "v" << v + 1;
      const int difference =
          (tv.to(torch::kInt32) - cases[k].ours.reshape({-1}).to(torch::kInt32)).abs().max().item<int>();
      const bool resize = cases[k].op.rfind("color_jitter", 0) != 0;
      const std::size_t exact = resize && detail::native_uint8_resize() ? 1 : 0;
      EXPECT_LE(difference, v == exact ? 0 : 1) << "v" << v + 1;
      largest[cases[k].op][v] = std::max(largest[cases[k].op][v], difference);
    }
  }
  for (const auto& [op, both] : largest) {
    std::cout << op << ": largest difference to torchvision v1 " << both[0] << ", v2 " << both[1] << "\n";
  }
}

}  // namespace
}  // namespace gputrain::data
