// data.decode: gpu's loader on the CPU, libjpeg-turbo standing in for nvJPEG:
// its worker threads, prefetch queue, resumption, ddp rows and labels make
// HostLoader's batches, and a bad file stops the epoch at its batch.
#include "loaders/gpu_decode_loader.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/data/host_loader.h"
#include "jpeg_files.h"
#include "support/temp_dir.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

class GpuDecodeLoaderTest : public ::testing::Test {
 protected:
  testing::TempDir dir_{"gputrain-gpu-loader"};
};

// Files of the split's size: HostLoader decodes each box at full scale (no
// DCT scaling below twice the output), so the batches agree to the bit.
TEST_F(GpuDecodeLoaderTest, MakesHostLoadersBatchesFromItsWorkers) {
  const std::vector<fs::path> files = testing::write_jpegs(dir_.path(), 7, {{24, 24}});
  const auto dataset = std::make_shared<testing::JpegFiles>(files, ImageShape{3, 24, 24});
  for (const Shard shard : {Shard{0, 1}, Shard{1, 2}}) {
    LoaderOptions options = testing::augmented_options(4);
    options.num_workers = 2;
    options.prefetch = 1;
    options.resize = true;  // data.image_size: the training split's under random_resized_crop
    options.max_image_pixels = testing::kJpegMaxPixels;
    options.shard = shard;
    HostLoader host(dataset, options);
    GpuDecodeLoader loader(dataset, options, testing::cpu_decode_all);
    ASSERT_EQ(loader.batches_per_epoch(), 2);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      host.start_epoch(epoch, epoch);  // the second epoch resumed at its second batch
      loader.start_epoch(epoch, epoch);
      for (int64_t index = epoch; index < 2; ++index) {
        const std::string what = "shard " + std::to_string(shard.index) + " epoch " + std::to_string(epoch) +
                                 " batch " + std::to_string(index);
        const std::optional<Batch> expected = host.next();
        const std::optional<Batch> got = loader.next();
        ASSERT_TRUE(expected && got) << what;
        EXPECT_EQ(got->index, index) << what;
        EXPECT_EQ(got->whole_rows, expected->whole_rows) << what;
        EXPECT_TRUE(torch::equal(got->inputs, expected->inputs)) << what;
        EXPECT_TRUE(torch::equal(got->targets, expected->targets)) << what;
      }
      EXPECT_FALSE(loader.next().has_value());
    }
  }
}

// A file that cannot be read (no JPEG header: in a worker) or decoded (cut
// short: in next()) is a DataError naming it when its batch is due, after the
// batches before it; the epoch then ends, and the next one starts afresh.
TEST_F(GpuDecodeLoaderTest, ABadFileStopsTheEpochAtItsBatchNamingIt) {
  std::vector<fs::path> files = testing::write_jpegs(dir_.path(), 6, {{24, 24}});
  const std::string good = testing::read_text(files[3]);
  for (const std::string& bad : {std::string("not a jpeg at all"), good.substr(0, good.size() / 2)}) {
    testing::write_text(files[3], bad);
    const auto dataset = std::make_shared<testing::JpegFiles>(files, ImageShape{3, 24, 24});
    LoaderOptions options;
    options.batch_size = 2;  // in file order: the bad file is in batch 1
    options.num_workers = 2;
    options.max_image_pixels = testing::kJpegMaxPixels;
    GpuDecodeLoader loader(dataset, options, testing::cpu_decode_all);
    loader.start_epoch(0);
    ASSERT_TRUE(loader.next().has_value());
    try {
      loader.next();
      FAIL() << "a bad file decoded";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(files[3].string()), std::string::npos) << e.what();
    }
    EXPECT_FALSE(loader.next().has_value());
    testing::write_text(files[3], good);
    loader.start_epoch(1);
    for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(loader.next().has_value());
  }
}

}  // namespace
}  // namespace gputrain::data::detail
