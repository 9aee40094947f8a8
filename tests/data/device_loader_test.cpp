// DeviceLoader against HostLoader: the same samples, order, augmentation and
// normalisation, batch by batch, with the "device" being the CPU (and a GPU
// where there is one).
#include "gputrain/data/device_loader.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <numeric>

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

TEST(DeviceLoader, MakeBatchLoaderFollowsTheChoiceAndAutoCachesOnTheCpu) {
  const auto dataset = index_dataset(8);
  EXPECT_NE(
      dynamic_cast<DeviceLoader*>(make_batch_loader(dataset, {}, {true, "set"}, {false, "set"}, torch::kCPU).get()),
      nullptr);
  EXPECT_NE(
      dynamic_cast<HostLoader*>(make_batch_loader(dataset, {}, {false, "set"}, {false, "set"}, torch::kCPU).get()),
      nullptr);
  // auto: the split is in host memory already, so the batched device path.
  EXPECT_TRUE(choose_device_cache(config::Switch::kAuto, *dataset, -1, torch::kCPU).on);
  EXPECT_FALSE(choose_device_cache(config::Switch::kOff, *dataset, -1, torch::kCPU).on);
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

// Under ddp each rank loads only its rows of every batch (LoaderOptions::shard).
std::unique_ptr<BatchLoader> sharded(bool on_device, std::shared_ptr<const Dataset> dataset, LoaderOptions options,
                                     Shard shard) {
  options.shard = shard;
  if (on_device) return std::make_unique<DeviceLoader>(std::move(dataset), std::move(options), torch::kCPU);
  return std::make_unique<HostLoader>(std::move(dataset), std::move(options));
}

// The ranks' shards of each batch, put together, are the batch of one process, bit for bit: the same
// samples in the same order, each augmented with its own row's draws. 100 images in batches of 24 end
// with a batch of 4, which 3 ranks share as 2, 2 and none.
TEST(LoaderShards, TheRanksRowsMakeOneProcesssBatchesBitForBit) {
  const auto dataset = image_dataset(100, 3, 10);
  for (const LoaderOptions& options : augmentations()) {
    for (const int64_t ranks : {2, 3}) {
      for (const bool on_device : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "reflect " << options.reflect << ", alternating_flip " << options.alternating_flip << ", "
                     << ranks << " ranks, " << (on_device ? "DeviceLoader" : "HostLoader"));
        HostLoader whole(dataset, options);
        std::vector<std::unique_ptr<BatchLoader>> shards;
        for (int64_t r = 0; r < ranks; ++r) shards.push_back(sharded(on_device, dataset, options, {r, ranks}));
        for (int64_t epoch = 0; epoch < 2; ++epoch) {
          whole.start_epoch(epoch);
          for (auto& shard : shards) shard->start_epoch(epoch);
          while (auto want = whole.next()) {
            std::vector<torch::Tensor> inputs, targets;
            for (int64_t r = 0; r < ranks; ++r) {
              const auto got = shards[static_cast<std::size_t>(r)]->next();
              ASSERT_TRUE(got.has_value());
              EXPECT_EQ(got->index, want->index);
              EXPECT_EQ(got->global_size(), want->size());
              const RowRange mine = shard_rows(want->size(), {r, ranks});
              EXPECT_EQ(got->size(), mine.end - mine.begin);
              inputs.push_back(got->inputs);
              targets.push_back(got->targets);
            }
            EXPECT_TRUE(torch::equal(torch::cat(inputs), want->inputs))
                << "epoch " << epoch << " batch " << want->index;
            EXPECT_TRUE(torch::equal(torch::cat(targets), want->targets));
          }
          for (auto& shard : shards) EXPECT_FALSE(shard->next().has_value());
        }
      }
    }
  }
}

// An image set decoded on demand (as image_folder under data.cache: none) that records what it decodes.
class RecordedReads final : public Dataset {
 public:
  explicit RecordedReads(std::shared_ptr<const Dataset> images) : images_(std::move(images)) {}
  const DatasetInfo& info() const override { return images_->info(); }
  const torch::Tensor& inputs() const override { return none_; }
  const torch::Tensor& targets() const override { return images_->targets(); }
  bool resident() const override { return false; }
  void read_image(int64_t index, uint8_t* out) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reads_.push_back(index);
    }
    images_->read_image(index, out);
  }
  std::vector<int64_t> reads() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<int64_t> sorted = reads_;
    std::sort(sorted.begin(), sorted.end());
    return sorted;
  }

 private:
  std::shared_ptr<const Dataset> images_;
  torch::Tensor none_;
  mutable std::mutex mutex_;
  mutable std::vector<int64_t> reads_;
};

// Each of 2 ranks decodes its own half of every batch and nothing else: together, every sample once an epoch.
TEST(LoaderShards, ARankDecodesOnlyItsOwnRows) {
  const auto images = image_dataset(50, 3, 8);
  LoaderOptions options = augmented();
  options.mean.clear();
  options.std.clear();
  std::vector<std::shared_ptr<RecordedReads>> recorded;
  std::vector<int64_t> together;
  for (int64_t r = 0; r < 2; ++r) {
    recorded.push_back(std::make_shared<RecordedReads>(images));
    const auto shard = sharded(/*on_device=*/false, recorded.back(), options, {r, 2});
    shard->start_epoch(0);
    int64_t rows = 0;
    while (auto batch = shard->next()) rows += batch->size();
    const std::vector<int64_t> reads = recorded.back()->reads();
    EXPECT_EQ(static_cast<int64_t>(reads.size()), rows) << "rank " << r;
    together.insert(together.end(), reads.begin(), reads.end());
  }
  std::sort(together.begin(), together.end());
  std::vector<int64_t> every(50);
  std::iota(every.begin(), every.end(), int64_t{0});
  EXPECT_EQ(together, every);
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

// Both splits are decided before either is cached (by the run's plan): the
// test split gets the memory the training split leaves.
TEST(DeviceCacheFit, TheTestSplitGetsWhatTheTrainingSplitLeaves) {
  const auto train = index_dataset(64);
  const auto test = index_dataset(64);
  const int64_t split = split_bytes(*train);
  const torch::Device gpu(torch::kCUDA, 0);
  const DeviceCacheChoices room = choose_device_caches(config::Switch::kAuto, *train, test.get(), 4 * split, gpu);
  EXPECT_TRUE(room.train.on) << room.train.why;
  EXPECT_TRUE(room.test.on) << room.test.why;
  const DeviceCacheChoices tight = choose_device_caches(config::Switch::kAuto, *train, test.get(), 2 * split, gpu);
  EXPECT_TRUE(tight.train.on) << tight.train.why;
  EXPECT_FALSE(tight.test.on);
  EXPECT_NE(tight.test.why.find(fmt::format("more than half of its {:.2f} GiB free",
                                            static_cast<double>(split) / (1024.0 * 1024.0 * 1024.0))),
            std::string::npos)
      << tight.test.why;
  EXPECT_THROW(choose_device_caches(config::Switch::kOn, *train, test.get(), 2 * split, gpu), DataError);
  EXPECT_FALSE(choose_device_caches(config::Switch::kAuto, *train, nullptr, 2 * split, gpu).test.on);
}

}  // namespace
}  // namespace gputrain::data
