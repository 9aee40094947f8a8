// DeviceLoader against HostLoader: the same samples, order, augmentation and
// normalisation, batch by batch, with the "device" being the CPU (and a GPU
// where there is one).
#include "gputrain/data/device_loader.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"
#include "test_datasets.h"

namespace gputrain::data {
namespace {

using testing::image_dataset;
using testing::index_dataset;

// Every batch of `epochs` epochs of both sources, value by value.
void expect_same_batches(BatchLoader& expected, BatchLoader& actual, int64_t epochs, double tolerance = 0) {
  ASSERT_EQ(expected.batches_per_epoch(), actual.batches_per_epoch());
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    expected.start_epoch(epoch);
    actual.start_epoch(epoch);
    int64_t batches = 0;
    while (auto want = expected.next()) {
      const auto got = actual.next();
      ASSERT_TRUE(got.has_value()) << "epoch " << epoch << " batch " << batches;
      EXPECT_EQ(got->index, want->index);
      const torch::Tensor inputs = got->inputs.cpu();
      EXPECT_EQ(inputs.sizes(), want->inputs.sizes());
      EXPECT_TRUE(tolerance == 0 ? torch::equal(inputs, want->inputs)
                                 : torch::allclose(inputs, want->inputs, tolerance, tolerance))
          << "epoch " << epoch << " batch " << batches;
      EXPECT_TRUE(torch::equal(got->targets.cpu(), want->targets)) << "epoch " << epoch << " batch " << batches;
      ++batches;
    }
    EXPECT_EQ(batches, expected.batches_per_epoch());
    EXPECT_FALSE(actual.next().has_value());
  }
}

// Shuffled, normalised per channel, padded-cropped and mirrored; 100 images
// in batches of 24 leave a short last batch of 4.
LoaderOptions augmented() {
  LoaderOptions options;
  options.batch_size = 24;
  options.shuffle = true;
  options.num_workers = 2;
  options.seed = 7;
  options.mean = {0.4, 0.5, 0.6};
  options.std = {0.2, 0.25, 0.3};
  options.random_crop = 3;
  options.hflip = true;
  return options;
}

// augmented() with reflect padding and/or the alternating flip.
std::vector<LoaderOptions> augmentations() {
  std::vector<LoaderOptions> all;
  for (const bool reflect : {false, true}) {
    for (const bool alternating : {false, true}) {
      LoaderOptions options = augmented();
      options.reflect = reflect;
      options.alternating_flip = alternating;
      all.push_back(options);
    }
  }
  return all;
}

TEST(DeviceLoader, SameImageBatchesAsHostLoader) {
  const auto dataset = image_dataset(100, 3, 10);
  for (const LoaderOptions& options : augmentations()) {
    SCOPED_TRACE(::testing::Message() << "reflect " << options.reflect << ", alternating_flip "
                                      << options.alternating_flip);
    HostLoader stream(dataset, options);
    DeviceLoader cache(dataset, options, torch::kCPU);
    expect_same_batches(stream, cache, 3);
  }
}

TEST(DeviceLoader, SameBatchesForFeaturesAndWithoutTheLastShortBatch) {
  const auto dataset = index_dataset(50);
  LoaderOptions options;
  options.batch_size = 8;
  options.shuffle = true;
  options.drop_last = true;
  options.seed = 3;
  HostLoader stream(dataset, options);
  DeviceLoader cache(dataset, options, torch::kCPU);
  EXPECT_EQ(cache.batches_per_epoch(), 6);
  expect_same_batches(stream, cache, 2);
}

TEST(DeviceLoader, RejectsWhatHostLoaderRejects) {
  LoaderOptions normalised;
  normalised.mean = {0.5};
  normalised.std = {0.5};
  EXPECT_THROW(DeviceLoader(index_dataset(8), normalised, torch::kCPU), ConfigError);  // features: no channels
  LoaderOptions wrong_channels = augmented();
  wrong_channels.mean = {0.5, 0.5};
  wrong_channels.std = {0.5, 0.5};
  EXPECT_THROW(DeviceLoader(image_dataset(4, 3, 8), wrong_channels, torch::kCPU), ConfigError);
}

TEST(DeviceLoader, BadLabelIsADataErrorNamingTheSampleBeforeAnyBatch) {
  const auto dataset = index_dataset(20);
  torch::Tensor labels = dataset->targets();  // a handle: the write reaches the data set
  labels[13] = 10;                            // 10 classes: labels 0..9
  try {
    DeviceLoader cache(dataset, LoaderOptions{}, torch::kCPU);
    FAIL() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("index sample 13 (memory): label 10 is outside 0..9"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceLoader, StopEndsTheEpochAndStartBeginsAnother) {
  LoaderOptions options;
  options.batch_size = 4;
  DeviceLoader cache(index_dataset(12), options, torch::kCPU);
  cache.start_epoch(0);
  ASSERT_TRUE(cache.next().has_value());
  cache.stop();
  EXPECT_FALSE(cache.next().has_value());
  cache.start_epoch(1);
  EXPECT_EQ(cache.next()->index, 0);
  EXPECT_EQ(cache.wait_seconds(), 0.0);
}

TEST(DeviceLoader, MakeBatchLoaderPicksAsSetAndTheDeviceLoaderUnderAutoOnTheCpu) {
  const auto dataset = index_dataset(8);
  EXPECT_NE(dynamic_cast<DeviceLoader*>(make_batch_loader(dataset, {}, config::Switch::kOn, torch::kCPU).get()),
            nullptr);
  EXPECT_NE(dynamic_cast<HostLoader*>(make_batch_loader(dataset, {}, config::Switch::kOff, torch::kCPU).get()),
            nullptr);
  // auto: the split is in host memory already, so the batched device path.
  EXPECT_NE(dynamic_cast<DeviceLoader*>(make_batch_loader(dataset, {}, config::Switch::kAuto, torch::kCPU).get()),
            nullptr);
}

TEST(DeviceLoader, SameImageBatchesOnTheGpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto dataset = image_dataset(100, 3, 10);
  for (const LoaderOptions& options : augmentations()) {
    SCOPED_TRACE(::testing::Message() << "reflect " << options.reflect << ", alternating_flip "
                                      << options.alternating_flip);
    HostLoader stream(dataset, options);
    DeviceLoader cache(dataset, options, torch::Device(torch::kCUDA, 0));
    cache.start_epoch(0);
    EXPECT_TRUE(cache.next()->inputs.is_cuda());
    expect_same_batches(stream, cache, 2, 1e-6);
  }
}

TEST(DeviceCacheFit, TheSplitMayTakeHalfTheFreeMemory) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const torch::Device gpu(torch::kCUDA, 1);
  EXPECT_EQ(device_cache_blocker(2 * kGiB, 4 * kGiB, gpu), "");
  EXPECT_EQ(device_cache_blocker(3 * kGiB, 4 * kGiB, gpu),
            "the split needs 3.00 GiB on cuda:1, more than half of its 4.00 GiB free");
  EXPECT_EQ(device_cache_blocker(100 * kGiB, -1, torch::Device(torch::kCPU)),
            "");  // the CPU holds the data set already
}

}  // namespace
}  // namespace gputrain::data
