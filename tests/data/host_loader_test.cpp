#include "gputrain/data/host_loader.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "gputrain/common/error.h"
#include "test_datasets.h"

namespace gputrain::data {
namespace {

using testing::image_dataset;
using testing::index_dataset;

LoaderOptions options_with(int64_t batch_size, int64_t workers, bool shuffle = false, uint64_t seed = 0) {
  LoaderOptions options;
  options.batch_size = batch_size;
  options.num_workers = workers;
  options.shuffle = shuffle;
  options.seed = seed;
  return options;
}

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), int64_t{0});
  return all;
}

// The sample indices of one epoch of a stream over index_dataset, in order.
std::vector<int64_t> epoch_order(HostLoader& stream, int64_t epoch) {
  stream.start_epoch(epoch);
  std::vector<int64_t> order;
  int64_t expected_index = 0;
  while (auto batch = stream.next()) {
    EXPECT_EQ(batch->index, expected_index++);
    const torch::Tensor ids = batch->inputs.select(1, 0).to(torch::kInt64);
    EXPECT_TRUE(torch::equal(batch->targets, ids % 10));  // inputs and targets stay paired
    order.insert(order.end(), ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  EXPECT_EQ(expected_index, stream.batches_per_epoch());
  return order;
}

std::vector<int64_t> batch_sizes(HostLoader& stream) {
  stream.start_epoch(0);
  std::vector<int64_t> sizes;
  while (auto batch = stream.next()) sizes.push_back(batch->size());
  return sizes;
}

TEST(HostLoader, EverySampleOncePerEpochInTheSameOrderForAnyWorkerCount) {
  const auto dataset = index_dataset(1000);
  std::vector<int64_t> reference;
  for (int64_t workers : {0, 1, 3}) {
    HostLoader stream(dataset, options_with(64, workers, /*shuffle=*/true, /*seed=*/11));
    for (int64_t epoch : {0, 1}) {
      const std::vector<int64_t> order = epoch_order(stream, epoch);
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(sorted, range(1000)) << "workers=" << workers << " epoch=" << epoch;
      if (epoch != 0) continue;
      if (workers == 0) reference = order;
      EXPECT_EQ(order, reference) << "workers=" << workers;
    }
  }
}

TEST(HostLoader, ShuffleDependsOnSeedAndEpochOnly) {
  const auto dataset = index_dataset(500);
  HostLoader a(dataset, options_with(50, 0, true, 3));
  HostLoader b(dataset, options_with(50, 2, true, 3));
  HostLoader other_seed(dataset, options_with(50, 0, true, 4));
  const std::vector<int64_t> epoch0 = epoch_order(a, 0), epoch1 = epoch_order(a, 1);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch_order(b, 1), epoch1);
  EXPECT_EQ(epoch_order(b, 0), epoch0);
  EXPECT_NE(epoch_order(other_seed, 0), epoch0);
}

TEST(HostLoader, WithoutShuffleTheOrderIsTheFileOrder) {
  HostLoader stream(index_dataset(100), options_with(30, 2));
  EXPECT_EQ(epoch_order(stream, 0), range(100));
  EXPECT_EQ(epoch_order(stream, 1), range(100));
}

TEST(HostLoader, LastBatchIsShortOrDropped) {
  HostLoader keep(index_dataset(100), options_with(30, 0));
  EXPECT_EQ(keep.batches_per_epoch(), 4);
  EXPECT_EQ(batch_sizes(keep), (std::vector<int64_t>{30, 30, 30, 10}));
  LoaderOptions drop = options_with(30, 2);
  drop.drop_last = true;
  HostLoader dropped(index_dataset(100), drop);
  EXPECT_EQ(dropped.batches_per_epoch(), 3);
  EXPECT_EQ(batch_sizes(dropped), (std::vector<int64_t>{30, 30, 30}));
}

TEST(HostLoader, UnlabeledAndRegressionTargets) {
  HostLoader none(index_dataset(10, TargetKind::kNone), options_with(4, 1));
  none.start_epoch(0);
  EXPECT_FALSE(none.next()->targets.defined());

  HostLoader regression(index_dataset(10, TargetKind::kValues), options_with(4, 1, true, 5));
  regression.start_epoch(0);
  const Batch batch = *regression.next();
  EXPECT_EQ(batch.targets.sizes(), (std::vector<int64_t>{4, 1}));
  EXPECT_TRUE(torch::equal(batch.targets, batch.inputs * 2));
}

TEST(HostLoader, WorkerErrorReachesNextNamingTheSample) {
  const auto dataset = index_dataset(100);
  dataset->targets()[57] = 42;  // a corrupt sample
  for (int64_t workers : {0, 3}) {
    HostLoader stream(dataset, options_with(10, workers));
    for (int64_t epoch : {0, 1}) {  // the stream stays usable after the error
      stream.start_epoch(epoch);
      int64_t good = 0;
      try {
        while (stream.next()) ++good;
        ADD_FAILURE() << "no DataError";
      } catch (const DataError& e) {
        EXPECT_EQ(good, 5);  // batches 0..4 arrive, in order, before batch 5 fails
        EXPECT_NE(std::string(e.what()).find("index sample 57 (memory): label 42 is outside 0..9"), std::string::npos)
            << e.what();
      }
      EXPECT_FALSE(stream.next().has_value());
    }
  }
}

TEST(HostLoader, StoppingMidEpochNeitherHangsNorLeaks) {
  const auto dataset = index_dataset(2000);
  LoaderOptions options = options_with(10, 3);
  options.prefetch = 2;
  {
    HostLoader destroyed(dataset, options);
    destroyed.start_epoch(0);
    ASSERT_TRUE(destroyed.next());
  }  // the destructor joins the workers
  HostLoader stream(dataset, options);
  stream.start_epoch(0);
  ASSERT_TRUE(stream.next());
  stream.stop();
  EXPECT_FALSE(stream.next().has_value());
  stream.start_epoch(1);
  ASSERT_TRUE(stream.next());
  stream.start_epoch(2);  // abandons epoch 1 after one batch
  int64_t batches = 0;
  while (stream.next()) ++batches;
  EXPECT_EQ(batches, 200);
}

TEST(HostLoader, WaitSecondsCountsThisEpochOnly) {
  HostLoader stream(index_dataset(100), options_with(10, 2));
  stream.start_epoch(0);
  while (stream.next()) {
  }
  EXPECT_GE(stream.wait_seconds(), 0.0);
  stream.start_epoch(1);
  EXPECT_EQ(stream.wait_seconds(), 0.0);
}

TEST(HostLoader, PinMemoryWithoutCudaWarnsOnceAndUsesOrdinaryMemory) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "CUDA is available: batches are pinned";
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  LoaderOptions options = options_with(10, 1);
  options.pin_memory = true;
  HostLoader first(index_dataset(20), options);
  HostLoader second(index_dataset(20), options);
  second.start_epoch(0);
  const Batch batch = *second.next();
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  const std::string warning = "data.pin_memory: CUDA is not available";
  ASSERT_NE(text.find(warning), std::string::npos) << text;
  EXPECT_EQ(text.find(warning, text.find(warning) + 1), std::string::npos) << text;
  EXPECT_FALSE(batch.inputs.is_pinned());
}

TEST(HostLoader, NormalisesImagesPerChannel) {
  const auto dataset = image_dataset(8, 3, 5);
  LoaderOptions options = options_with(8, 0);
  options.mean = {0.5, 0.25, 0.0};
  options.std = {0.5, 0.25, 2.0};
  HostLoader stream(dataset, options);
  stream.start_epoch(0);
  const Batch batch = *stream.next();
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{8, 3, 5, 5}));
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kFloat32);
  const torch::Tensor mean = torch::tensor({0.5, 0.25, 0.0}).view({1, 3, 1, 1});
  const torch::Tensor std = torch::tensor({0.5, 0.25, 2.0}).view({1, 3, 1, 1});
  const torch::Tensor expected = ((dataset->inputs().to(torch::kFloat64) / 255.0 - mean) / std).to(torch::kFloat32);
  EXPECT_TRUE(torch::allclose(batch.inputs, expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(batch.targets, dataset->targets()));

  options.mean = {0.5};  // one value serves every channel
  options.std = {0.5};
  HostLoader one(dataset, options);
  one.start_epoch(0);
  EXPECT_TRUE(torch::allclose(one.next()->inputs, dataset->inputs().to(torch::kFloat32) / 127.5 - 1.0, 1e-5, 1e-6));

  const torch::Tensor raw = [&] {
    HostLoader plain(dataset, options_with(8, 0));
    plain.start_epoch(0);
    return plain.next()->inputs;
  }();
  EXPECT_TRUE(torch::allclose(raw, dataset->inputs().to(torch::kFloat32) / 255.0));
}

TEST(HostLoader, NormalisationMustFitTheChannels) {
  LoaderOptions options = options_with(8, 0);
  options.mean = {0.5, 0.5};
  options.std = {0.5, 0.5};
  try {
    HostLoader stream(image_dataset(8, 3, 5), options);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.normalize.mean");
    EXPECT_NE(std::string(e.what()).find("needs 1 or 3 values"), std::string::npos) << e.what();
  }
  try {
    HostLoader stream(image_dataset(8, 1, 5), options);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 1 value for the 1 channel of "), std::string::npos) << e.what();
  }
  EXPECT_THROW(HostLoader(index_dataset(8), options), ConfigError);  // features: no channels to normalise
  LoaderOptions flip = options_with(8, 0);
  flip.hflip = true;
  EXPECT_THROW(HostLoader(index_dataset(8), flip), ConfigError);
}

// Every augmented image is its source shifted by (dy, dx) in [-pad, pad] and
// perhaps mirrored, with zeros coming in from the padding, or with `reflect`
// the edge mirrored as torch's reflection padding does.
bool is_crop_of(const torch::Tensor& out, const torch::Tensor& source, int64_t pad, bool reflect) {
  const int64_t height = source.size(1), width = source.size(2);
  const torch::Tensor padded =
      reflect ? torch::reflection_pad2d(source.to(torch::kFloat32), {pad, pad, pad, pad}).to(torch::kUInt8)
              : torch::constant_pad_nd(source, {pad, pad, pad, pad}, 0);
  for (bool flip : {false, true}) {
    for (int64_t dy = 0; dy <= 2 * pad; ++dy) {
      for (int64_t dx = 0; dx <= 2 * pad; ++dx) {
        torch::Tensor crop = padded.slice(1, dy, dy + height).slice(2, dx, dx + width);
        if (flip) crop = crop.flip({2});
        if (torch::equal(crop, out)) return true;
      }
    }
  }
  return false;
}

void expect_only_crops_and_mirrors(bool reflect) {
  SCOPED_TRACE(reflect ? "reflect padding" : "zero padding");
  const auto dataset = image_dataset(64, 3, 8);
  LoaderOptions options = options_with(16, 0, /*shuffle=*/true, /*seed=*/9);
  options.random_crop = 2;
  options.reflect = reflect;
  options.hflip = true;
  auto epoch_batches = [&](int64_t workers, int64_t epoch) {
    LoaderOptions o = options;
    o.num_workers = workers;
    HostLoader stream(dataset, o);
    stream.start_epoch(epoch);
    std::vector<Batch> batches;
    while (auto batch = stream.next()) batches.push_back(*batch);
    return batches;
  };
  const std::vector<Batch> a = epoch_batches(0, 0), b = epoch_batches(3, 0), c = epoch_batches(0, 1);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), a.size());
  bool any_change = false, epochs_differ = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].inputs.sizes(), (std::vector<int64_t>{16, 3, 8, 8}));
    EXPECT_TRUE(torch::equal(a[i].inputs, b[i].inputs)) << "batch " << i;
    epochs_differ |= !torch::equal(a[i].inputs, c[i].inputs);
    // Recover each sample's index from its label-free content: the stream is
    // shuffled, so match against the unaugmented pixels by search.
    const torch::Tensor bytes = (a[i].inputs * 255.0).round().to(torch::kUInt8);
    for (int64_t k = 0; k < bytes.size(0); ++k) {
      bool found = false;
      for (int64_t s = 0; s < dataset->info().samples && !found; ++s) {
        if (dataset->targets()[s].item<int64_t>() != a[i].targets[k].item<int64_t>()) continue;
        found = is_crop_of(bytes[k], dataset->inputs()[s], 2, reflect);
        any_change |= found && !torch::equal(bytes[k], dataset->inputs()[s]);
      }
      EXPECT_TRUE(found) << "batch " << i << " sample " << k;
    }
  }
  EXPECT_TRUE(any_change);
  EXPECT_TRUE(epochs_differ);
}

TEST(HostLoader, AugmentationIsDeterministicAndOnlyCropsAndMirrors) {
  expect_only_crops_and_mirrors(/*reflect=*/false);
  expect_only_crops_and_mirrors(/*reflect=*/true);
}

// Each image in file order, whole epochs in one batch: mirrored or not.
std::vector<bool> mirrored_in(const std::shared_ptr<const TensorDataset>& dataset, const LoaderOptions& options,
                              int64_t epoch) {
  HostLoader stream(dataset, options);
  stream.start_epoch(epoch);
  const torch::Tensor bytes = (stream.next()->inputs * 255.0).round().to(torch::kUInt8);
  std::vector<bool> mirrored;
  for (int64_t k = 0; k < bytes.size(0); ++k) {
    const torch::Tensor source = dataset->inputs()[k];
    EXPECT_TRUE(torch::equal(bytes[k], source) || torch::equal(bytes[k], source.flip({2}))) << k;
    mirrored.push_back(!torch::equal(bytes[k], source));
  }
  return mirrored;
}

TEST(HostLoader, AlternatingFlipMirrorsEachImageInEveryOtherEpoch) {
  const auto dataset = image_dataset(64, 1, 6);
  LoaderOptions options = options_with(64, 0);
  options.hflip = true;
  options.alternating_flip = true;
  const std::vector<bool> first = mirrored_in(dataset, options, 0);
  const std::vector<bool> second = mirrored_in(dataset, options, 1);
  const auto half = std::count(first.begin(), first.end(), true);
  EXPECT_GT(half, 16);
  EXPECT_LT(half, 48);
  for (std::size_t k = 0; k < first.size(); ++k) EXPECT_NE(first[k], second[k]) << "image " << k;
  EXPECT_EQ(mirrored_in(dataset, options, 2), first);
  options.seed = 5;
  EXPECT_NE(mirrored_in(dataset, options, 0), first) << "the seed picks the half";
}

TEST(LoaderOptions, TheTestSplitIsPlainAndEachSplitTakesTheBatchGiven) {
  config::DataConfig config;
  config.shuffle = true;
  config.drop_last = true;
  config.augment.random_crop = 4;
  config.augment.reflect = true;
  config.augment.hflip = true;
  config.augment.alternating_flip = true;
  config.normalize = {{0.5}, {0.5}};
  const LoaderOptions train = loader_options(config, Split::kTrain, 32, 3);
  EXPECT_EQ(train.batch_size, 32);
  EXPECT_TRUE(train.shuffle && train.drop_last && train.hflip && train.reflect && train.alternating_flip);
  EXPECT_EQ(train.random_crop, 4);
  EXPECT_EQ(train.seed, 3u);
  const LoaderOptions test = loader_options(config, Split::kTest, 100, 3);
  EXPECT_EQ(test.batch_size, 100);
  EXPECT_FALSE(test.shuffle || test.drop_last || test.hflip || test.reflect || test.alternating_flip);
  EXPECT_EQ(test.random_crop, 0);
  EXPECT_EQ(test.mean, std::vector<double>{0.5});
}

// Pinned batches come from LibTorch's caching host allocator: once a batch's
// copy to the GPU has run and the batch is dropped, its page-locked block
// serves a later batch, so an epoch of 32 batches stages in a few blocks,
// not one each (nor pins memory anew, a slow call, per batch).
TEST(HostLoader, PinnedBatchesReuseTheirStagingBlocks_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  LoaderOptions options;
  options.batch_size = 8;
  options.num_workers = 2;
  options.prefetch = 2;
  options.pin_memory = true;
  HostLoader loader(testing::image_dataset(256, 3, 16), options);
  loader.start_epoch(0);
  std::set<const void*> blocks;
  int64_t batches = 0;
  while (auto batch = loader.next()) {
    ASSERT_TRUE(batch->inputs.is_pinned());
    blocks.insert(batch->inputs.const_data_ptr());
    const torch::Tensor on_gpu = batch->inputs.to(torch::kCUDA, /*non_blocking=*/true);
    ++batches;
  }
  torch::cuda::synchronize();
  EXPECT_EQ(batches, 32);
  // Those in flight: the prefetched ones, one per worker, the one delivered and its copy.
  EXPECT_LE(static_cast<int64_t>(blocks.size()), options.prefetch + options.num_workers + 2) << blocks.size();
}

}  // namespace
}  // namespace gputrain::data
