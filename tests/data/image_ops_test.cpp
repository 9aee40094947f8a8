// The draws of torchvision's random image transforms (random numbers ->
// parameters): their ranges and statistics, and how the loaders use them.
// The ops' pixels (parameters -> pixels) are checked against torchvision
// itself in image_ops_cli_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "gputrain/common/error.h"
#include "gputrain/data/device_loader.h"
#include "gputrain/data/host_loader.h"
#include "images/image_ops.h"
#include "loaders/batch_plan.h"
#include "test_datasets.h"

namespace gputrain::data {
namespace {

using detail::CropBox;
using detail::draw_resized_crop;
using detail::SplitMix64;

ResizedCrop crop_of(std::array<double, 2> scale, std::array<double, 2> ratio) {
  ResizedCrop crop;
  crop.size = 1;
  crop.scale = scale;
  crop.ratio = ratio;
  return crop;
}

struct Moments {
  double mean = 0, low = 1e300, high = -1e300;
};

template <class F>
Moments moments(int64_t draws, F value) {
  Moments m;
  for (int64_t i = 0; i < draws; ++i) {
    const double v = value();
    m.mean += v / static_cast<double>(draws);
    m.low = std::min(m.low, v);
    m.high = std::max(m.high, v);
  }
  return m;
}

// When every try fits (a quarter of a large image), the box's area share is
// the drawn scale, its aspect ratio log-uniform over the bounds and its place uniform.
TEST(RandomResizedCrop, AreaShareRatioAndPlaceFollowTheirDistributions) {
  SplitMix64 rng(11);
  const int64_t side = 1000, draws = 4000;
  const ResizedCrop uniform_ratio = crop_of({0.25, 0.25}, {3.0 / 4.0, 4.0 / 3.0});
  std::vector<CropBox> boxes;
  for (int64_t i = 0; i < draws; ++i) boxes.push_back(draw_resized_crop(rng, side, side, uniform_ratio));
  std::size_t k = 0;
  const Moments log_ratio = moments(draws, [&] {
    const CropBox& b = boxes[k++];
    EXPECT_TRUE(b.top >= 0 && b.left >= 0 && b.top + b.height <= side && b.left + b.width <= side);
    EXPECT_NEAR(static_cast<double>(b.height * b.width) / (side * side), 0.25, 0.002);
    return std::log(static_cast<double>(b.width) / static_cast<double>(b.height));
  });
  // log-uniform over [log 3/4, log 4/3]: mean 0, the bounds reached (to the rounding of the sides)
  EXPECT_NEAR(log_ratio.mean, 0.0, 0.01);
  EXPECT_NEAR(log_ratio.low, std::log(3.0 / 4.0), 0.01);
  EXPECT_NEAR(log_ratio.high, std::log(4.0 / 3.0), 0.01);
  k = 0;
  const Moments place = moments(draws, [&] {
    const CropBox& b = boxes[k++];
    return static_cast<double>(b.top) / static_cast<double>(side - b.height);
  });
  EXPECT_NEAR(place.mean, 0.5, 0.02);
  EXPECT_LT(place.low, 0.01);
  EXPECT_GT(place.high, 0.99);

  const ResizedCrop uniform_scale = crop_of({0.1, 0.5}, {1.0, 1.0});
  const Moments share = moments(draws, [&] {
    const CropBox b = draw_resized_crop(rng, side, side, uniform_scale);
    EXPECT_EQ(b.height, b.width);
    return static_cast<double>(b.height * b.width) / (side * side);
  });
  EXPECT_NEAR(share.mean, 0.3, 0.01);
  EXPECT_NEAR(share.low, 0.1, 0.002);
  EXPECT_NEAR(share.high, 0.5, 0.002);
}

// torchvision's defaults on a small image: boxes stay inside, and a box too
// tall for it (about 43% of the tries on 24 x 40) is drawn again, up to 10
// times, so the centre-crop fallback (24 x 32: the width cut to ratio 4/3) is rare.
TEST(RandomResizedCrop, DefaultBoxesStayInsideTheImageAndTooLargeOnesAreDrawnAgain) {
  SplitMix64 rng(3);
  const ResizedCrop defaults;
  int64_t fallbacks = 0;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = draw_resized_crop(rng, 24, 40, defaults);
    ASSERT_TRUE(b.height > 0 && b.width > 0 && b.top >= 0 && b.left >= 0 && b.top + b.height <= 24 &&
                b.left + b.width <= 40)
        << b.top << " " << b.left << " " << b.height << " " << b.width;
    fallbacks += b.top == 0 && b.left == 4 && b.height == 24 && b.width == 32;
  }
  EXPECT_LT(fallbacks, 10);
}

// No try fits: the centre crop, clamped to the ratio bounds (torchvision's fallback).
TEST(RandomResizedCrop, NoFittingTryFallsBackToTheCentreCrop) {
  SplitMix64 rng(5);
  const auto box = [&](int64_t h, int64_t w, std::array<double, 2> ratio) {
    const CropBox b = draw_resized_crop(rng, h, w, crop_of({2.0, 3.0}, ratio));  // twice the area: never fits
    return std::vector<int64_t>{b.top, b.left, b.height, b.width};
  };
  EXPECT_EQ(box(40, 60, {3.0 / 4.0, 4.0 / 3.0}), (std::vector<int64_t>{0, 3, 40, 53}));  // 1.5 > 4/3: width cut
  EXPECT_EQ(box(60, 60, {2.0, 3.0}), (std::vector<int64_t>{15, 0, 30, 60}));             // 1 < 2: height cut
  EXPECT_EQ(box(30, 40, {0.5, 2.0}), (std::vector<int64_t>{0, 0, 30, 40}));              // in bounds: all of it
}

LoaderOptions resized_crop_options(int64_t size) {
  LoaderOptions options;
  options.batch_size = 8;
  options.shuffle = true;
  options.seed = 4;
  options.resized_crop.size = size;
  return options;
}

// A ratio bound past twice the image's aspect ratio: torchvision's fallback
// rounds a side to 0 (get_params gives (16, 0, 0, 32) and (0, 16, 32, 0) for
// these on a 32x32 image, and its resize then fails); here that side is 1
// pixel, centred as torchvision centres, and the loader makes its batch.
TEST(RandomResizedCrop, ARatioNoBoxMeetsFallsBackToAOnePixelStripNotAnEmptyBox) {
  SplitMix64 rng(5);
  const auto box = [&](std::array<double, 2> ratio) {
    const CropBox b = draw_resized_crop(rng, 32, 32, crop_of({0.08, 1.0}, ratio));
    return std::vector<int64_t>{b.top, b.left, b.height, b.width};
  };
  EXPECT_EQ(box({100.0, 1000.0}), (std::vector<int64_t>{15, 0, 1, 32}));
  EXPECT_EQ(box({0.001, 0.01}), (std::vector<int64_t>{0, 15, 32, 1}));
  LoaderOptions options = resized_crop_options(32);
  options.resized_crop.ratio = {100.0, 1000.0};
  HostLoader stream(testing::image_dataset(8, 3, 32), options);
  stream.start_epoch(0);
  const auto batch = stream.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->inputs.sizes(), (std::vector<int64_t>{8, 3, 32, 32}));
}

// A sample's box depends on the seed, the epoch, the batch and its position only.
TEST(RandomResizedCrop, BoxesDependOnSeedEpochBatchAndPosition) {
  const LoaderOptions options = resized_crop_options(16);
  const auto boxes = [&](const LoaderOptions& o, int64_t epoch, int64_t index, int64_t count) {
    std::vector<int64_t> flat;
    for (const CropBox& b : detail::draw_crop_boxes(o, o.seed, epoch, index, count, 16, 16)) {
      flat.insert(flat.end(), {b.top, b.left, b.height, b.width});
    }
    return flat;
  };
  const std::vector<int64_t> first = boxes(options, 0, 0, 8);
  EXPECT_EQ(boxes(options, 0, 0, 8), first);
  const std::vector<int64_t> fewer = boxes(options, 0, 0, 3);
  EXPECT_EQ(fewer, std::vector<int64_t>(first.begin(), first.begin() + 12));
  EXPECT_NE(boxes(options, 1, 0, 8), first);
  EXPECT_NE(boxes(options, 0, 1, 8), first);
  LoaderOptions reseeded = options;
  reseeded.seed = 5;
  EXPECT_NE(boxes(reseeded, 0, 0, 8), first);
  EXPECT_TRUE(detail::draw_crop_boxes(resized_crop_options(0), options.seed, 0, 0, 8, 16, 16).empty());
}

// A box drawn alone, in an image of its own size (a file at its stored size),
// comes from the same stream as that position's in the batch's draw.
TEST(RandomResizedCrop, ABoxDrawnAloneIsItsPositionsInTheBatch) {
  const LoaderOptions options = resized_crop_options(16);
  const std::vector<CropBox> batch = detail::draw_crop_boxes(options, options.seed, 2, 3, 8, 300, 400);
  for (int64_t i = 0; i < 8; ++i) {
    const CropBox alone = detail::draw_crop_box(options, options.seed, 2, 3, i, 300, 400);
    const CropBox& in_batch = batch[static_cast<std::size_t>(i)];
    EXPECT_EQ(std::tie(alone.top, alone.left, alone.height, alone.width),
              std::tie(in_batch.top, in_batch.left, in_batch.height, in_batch.width));
  }
}

// The loaders crop every training image to its box and resize it back: each
// image of a batch is resized_crop of its source for that box.
TEST(RandomResizedCrop, HostAndDeviceLoadersResizeEachImagesBox) {
  const auto dataset = testing::image_dataset(20, 3, 12);
  LoaderOptions options = resized_crop_options(12);
  options.shuffle = false;
  HostLoader stream(dataset, options);
  DeviceLoader cache(dataset, options, torch::kCPU);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    stream.start_epoch(epoch);
    cache.start_epoch(epoch);
    int64_t changed = 0;
    while (auto batch = stream.next()) {
      const auto boxes = detail::draw_crop_boxes(options, options.seed, epoch, batch->index, batch->size(), 12, 12);
      const torch::Tensor bytes = (batch->inputs * 255.0).round().to(torch::kUInt8);
      for (int64_t k = 0; k < batch->size(); ++k) {
        const torch::Tensor source = dataset->inputs()[batch->index * 8 + k];
        const torch::Tensor expected = detail::resized_crop(source, boxes[static_cast<std::size_t>(k)], 12, 12);
        EXPECT_TRUE(torch::equal(bytes[k], expected)) << "epoch " << epoch << " image " << k;
        changed += !torch::equal(bytes[k], source);
      }
      EXPECT_TRUE(torch::equal(cache.next()->inputs, batch->inputs)) << "epoch " << epoch << " batch " << batch->index;
    }
    EXPECT_GT(changed, 15);
  }
}

TEST(RandomResizedCrop, TheSizeMustBeTheImagesAndTheBoundsOrdered) {
  const auto expect_error = [](const LoaderOptions& options, const std::string& key, const std::string& text) {
    try {
      HostLoader stream(testing::image_dataset(4, 3, 10), options);
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), key);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error(resized_crop_options(8), "data.augment.random_resized_crop.size",
               "is 8, but images yields 10x10 images; the crop is resized to the shape the model sees, so set "
               "data.image_size: [8]");
  LoaderOptions reversed = resized_crop_options(10);
  reversed.resized_crop.ratio = {2.0, 1.0};
  expect_error(reversed, "data.augment.random_resized_crop.ratio", "must be [low, high] with 0 < low <= high");
  EXPECT_THROW(HostLoader(testing::index_dataset(4), resized_crop_options(1)), ConfigError);  // features
}

// ColorJitter.get_params: the order is a permutation, uniform over all 24;
// each factor is uniform in its range; an op of range 0 is off.
TEST(ColorJitter, OrderAndFactorsFollowTheirDistributions) {
  SplitMix64 rng(17);
  ColorJitter jitter;
  jitter.brightness = 0.4;
  jitter.contrast = 1.5;  // [max(0, -0.5), 2.5]: clamped at 0
  jitter.hue = 0.2;
  const int64_t draws = 24000;
  std::map<std::array<int, 4>, int64_t> orders;
  std::array<Moments, 4> factors;
  for (auto& m : factors) m = {};
  for (int64_t i = 0; i < draws; ++i) {
    const detail::JitterDraw d = detail::draw_color_jitter(rng, jitter);
    std::array<int, 4> sorted = d.order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, (std::array<int, 4>{0, 1, 2, 3}));
    ++orders[d.order];
    ASSERT_FALSE(d.factor[2].has_value());  // saturation 0: off
    for (std::size_t op : {0, 1, 3}) {
      ASSERT_TRUE(d.factor[op].has_value());
      factors[op].mean += *d.factor[op] / draws;
      factors[op].low = std::min(factors[op].low, *d.factor[op]);
      factors[op].high = std::max(factors[op].high, *d.factor[op]);
    }
  }
  ASSERT_EQ(orders.size(), 24u);
  for (const auto& [order, n] : orders) EXPECT_NEAR(static_cast<double>(n), draws / 24.0, 150) << n;
  const std::array<std::array<double, 2>, 4> ranges{{{0.6, 1.4}, {0.0, 2.5}, {1, 1}, {-0.2, 0.2}}};
  for (std::size_t op : {0, 1, 3}) {
    SCOPED_TRACE(op);
    EXPECT_NEAR(factors[op].mean, (ranges[op][0] + ranges[op][1]) / 2, 0.02);
    EXPECT_GE(factors[op].low, ranges[op][0]);
    EXPECT_LT(factors[op].low, ranges[op][0] + 0.01);
    EXPECT_LE(factors[op].high, ranges[op][1]);
    EXPECT_GT(factors[op].high, ranges[op][1] - 0.01);
  }
  EXPECT_TRUE(detail::draw_color_jitters(ImagePipeline{}, /*seed=*/0, 0, 0, 4).empty());
}

// Both loaders jitter each training image by its draw, after the resized crop
// and before the padding crop and flip; the host's batches are the device's.
TEST(ColorJitter, HostAndDeviceLoadersJitterEachImageByItsDraw) {
  const auto dataset = testing::image_dataset(10, 3, 8);
  LoaderOptions options = resized_crop_options(8);
  options.shuffle = false;
  options.color_jitter = {0.4, 0.4, 0.4, 0.1};
  HostLoader stream(dataset, options);
  DeviceLoader cache(dataset, options, torch::kCPU);
  stream.start_epoch(1);
  cache.start_epoch(1);
  while (auto batch = stream.next()) {
    const auto boxes = detail::draw_crop_boxes(options, options.seed, 1, batch->index, batch->size(), 8, 8);
    const auto jitters = detail::draw_color_jitters(options, options.seed, 1, batch->index, batch->size());
    const torch::Tensor bytes = (batch->inputs * 255.0).round().to(torch::kUInt8);
    for (int64_t k = 0; k < batch->size(); ++k) {
      const auto i = static_cast<std::size_t>(k);
      const torch::Tensor source = dataset->inputs()[batch->index * 8 + k];
      const torch::Tensor expected = detail::color_jitter(detail::resized_crop(source, boxes[i], 8, 8), jitters[i]);
      EXPECT_TRUE(torch::equal(bytes[k], expected)) << "batch " << batch->index << " image " << k;
    }
    EXPECT_TRUE(torch::equal(cache.next()->inputs, batch->inputs)) << "batch " << batch->index;
  }
  LoaderOptions bad_hue;
  bad_hue.color_jitter.hue = 0.6;
  try {
    HostLoader rejected(dataset, bad_hue);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.augment.color_jitter.hue");
  }
}

}  // namespace
}  // namespace gputrain::data
