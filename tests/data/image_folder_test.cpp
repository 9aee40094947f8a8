// dataset: image_folder — PNG and JPEG folders written by export_images (the
// `datasets export --format png|jpeg` code), read back decoded at start or per
// batch, converted, resized, and each way such a folder can be wrong.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <jpeglib.h>  // after <cstdio>: it needs FILE

#include "gputrain/common/error.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/export.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/data/prediction_inputs.h"
#include "gputrain/data/tensor_dataset.h"
#include "images/image_files.h"
#include "images/image_ops.h"
#include "jpeg_files.h"
#include "loaders/batch_plan.h"
#include "support/temp_dir.h"
#include "test_datasets.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::TempDir;

// Three classes of `count` images of `shape` ([C, H, W]).
DatasetInfo three_classes(int64_t count, std::vector<int64_t> shape) {
  DatasetInfo info;
  info.name = "made";
  info.samples = count;
  info.input_shape = std::move(shape);
  info.classes = 3;
  info.images = true;
  return info;
}

// `count` random images of `shape` in classes cat, dog, eel, labelled 0, 1, 2, 0, ... sorted, so that the
// folder's order (class by class, index order within one) is the tensor's.
TensorDataset images(int64_t count, std::vector<int64_t> shape, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<int64_t> sizes{count};
  sizes.insert(sizes.end(), shape.begin(), shape.end());
  DatasetInfo info = three_classes(count, shape);
  info.class_names = {"cat", "dog", "eel"};
  return TensorDataset(info, torch::randint(0, 256, sizes, torch::kUInt8),
                       std::get<0>(torch::arange(count, torch::kInt64).remainder(3).sort()));
}

class ImageFolder : public ::testing::Test {
 protected:
  // Writes both splits of `made` under the test's root (or `root`).
  void write(const TensorDataset& made, ImageFormat format = ImageFormat::kPng, const fs::path& root = {}) {
    for (const Split split : {Split::kTrain, Split::kTest}) {
      export_images(made, root.empty() ? dir_.path() : root, split, format, 100, /*overwrite=*/false);
    }
  }
  config::DataConfig folder(config::ImageCache cache = config::ImageCache::kMemory) const {
    config::DataConfig config;
    config.dataset = config::DatasetName::kImageFolder;
    config.root = dir_.path().string();
    config.cache = cache;
    return config;
  }
  static std::string error(const config::DataConfig& config, Split split = Split::kTrain) {
    return testing::make_dataset_error(config, split);
  }
  // Every batch of one shuffled epoch, augmented, from 2 worker threads.
  static std::vector<Batch> epoch(std::shared_ptr<const Dataset> dataset) {
    LoaderOptions options;
    options.batch_size = 5;
    options.shuffle = true;
    options.num_workers = 2;
    options.seed = 7;
    options.random_crop = 1;
    options.hflip = true;
    HostLoader loader(std::move(dataset), options);
    loader.start_epoch(1);
    std::vector<Batch> batches;
    while (auto batch = loader.next()) batches.push_back(*batch);
    return batches;
  }
  fs::path file(const std::string& name) const { return dir_.path() / name; }
  // `count` smooth photos (smooth_photos) as JPEGs, read per batch with a random resized crop to 16 x 16.
  config::DataConfig cropped_photos(int64_t count);

  TempDir dir_{"image-folder"};
};

TEST_F(ImageFolder, PngFoldersHoldTheExactPixelsWithClassesInSortedOrder) {
  const TensorDataset made = images(12, {1, 5, 7}, 1);
  write(made);
  EXPECT_TRUE(fs::is_regular_file(file("train/cat/00.png")));
  EXPECT_TRUE(fs::is_regular_file(file("train/eel/11.png")));
  const auto train = make_dataset(folder(), Split::kTrain, 0);
  EXPECT_EQ(train->info().name, "image_folder");
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_EQ(train->info().class_names, (std::vector<std::string>{"cat", "dog", "eel"}));
  EXPECT_EQ(train->info().classes, 3);
  EXPECT_TRUE(train->resident());
  EXPECT_TRUE(torch::equal(train->inputs(), made.inputs()));
  EXPECT_TRUE(torch::equal(train->targets(), made.targets()));
  EXPECT_NE(train->describe_sample(4).find(file("train/dog/04.png").string()), std::string::npos);
  EXPECT_TRUE(torch::equal(make_dataset(folder(), Split::kTest, 0)->inputs(), made.inputs()));
}

std::string big_endian(uint32_t value) {
  return std::string{static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
                     static_cast<char>(value)};
}

// A PNG chunk: its length, `type_and_data` and their CRC.
std::string png_chunk(const std::string& type_and_data) {
  const auto crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(type_and_data.data()), static_cast<uInt>(type_and_data.size())));
  return big_endian(static_cast<uint32_t>(type_and_data.size() - 4)) + type_and_data + big_endian(crc);
}

// Inserts a tEXt chunk of `bytes` characters after `png`'s IHDR, as large metadata (an ICC profile,
// text) can sit between the size and the pixels.
void add_text_chunk(const fs::path& png, std::size_t bytes) {
  std::string file = gputrain::testing::read_text(png);
  const std::size_t after_header = 8 + 4 + 4 + 13 + 4;  // signature, IHDR's length, type, data and CRC
  file.insert(after_header, png_chunk(std::string("tEXtComment") + '\0' + std::string(bytes, 'x')));
  gputrain::testing::write_text(png, file);
}

// A 16-bit grey PNG of `values` ([H, W], int32) with no gAMA or sRGB chunk, as most tools write one.
void write_grey16_png(const fs::path& png, const torch::Tensor& values) {
  const auto height = static_cast<uint32_t>(values.size(0)), width = static_cast<uint32_t>(values.size(1));
  std::string rows;
  for (uint32_t y = 0; y < height; ++y) {
    rows += '\0';  // filter: none
    for (uint32_t x = 0; x < width; ++x) {
      const int value = values[y][x].item<int>();
      rows += {static_cast<char>(value >> 8), static_cast<char>(value & 0xff)};
    }
  }
  std::string packed(compressBound(static_cast<uLong>(rows.size())), '\0');
  uLongf size = packed.size();
  ASSERT_EQ(compress(reinterpret_cast<Bytef*>(packed.data()), &size, reinterpret_cast<const Bytef*>(rows.data()),
                     static_cast<uLong>(rows.size())),
            Z_OK);
  packed.resize(size);
  const std::string header = "IHDR" + big_endian(width) + big_endian(height) + std::string{16, 0, 0, 0, 0};
  gputrain::testing::write_text(
      png, std::string("\x89PNG\r\n\x1a\n") + png_chunk(header) + png_chunk("IDAT" + packed) + png_chunk("IEND"));
}

TEST_F(ImageFolder, MetadataBeforeThePixelsIsReadPast) {
  const TensorDataset made = images(6, {1, 4, 4}, 13);
  write(made);
  add_text_chunk(file("train/cat/0.png"), 100 * 1024);  // the first training image: every split reads its header
  add_text_chunk(file("train/dog/2.png"), 100 * 1024);
  EXPECT_TRUE(torch::equal(make_dataset(folder(), Split::kTrain, 0)->inputs(), made.inputs()));
  const auto lazy = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);  // every header read first
  EXPECT_EQ(lazy->info().input_shape, (std::vector<int64_t>{1, 4, 4}));
}

// A 16-bit PNG holds sRGB values like an 8-bit one: 257 x v reads as v, as PIL and torchvision read it (libpng
// took such a file as linear light and brightened it: 162 became 207).
TEST_F(ImageFolder, SixteenBitPngsReadAsTheirValueOver257) {
  const TensorDataset made = images(6, {1, 4, 4}, 21);
  write(made);
  write_grey16_png(file("train/cat/0.png"), made.inputs()[0][0].to(torch::kInt32) * 257);
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    const auto train = make_dataset(folder(cache), Split::kTrain, 0);
    std::vector<uint8_t> pixels(16);
    train->read_image(0, pixels.data());
    EXPECT_TRUE(torch::equal(torch::from_blob(pixels.data(), {1, 4, 4}, torch::kUInt8), made.inputs()[0]));
  }
}

TEST_F(ImageFolder, DecodingPerBatchGivesTheSameBatchesAsDecodingAtStart) {
  write(images(23, {3, 6, 6}, 2));
  const auto memory = make_dataset(folder(config::ImageCache::kMemory), Split::kTrain, 0);
  const auto none = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);
  EXPECT_FALSE(none->resident());
  EXPECT_FALSE(none->inputs().defined());
  EXPECT_EQ(split_bytes(*none), static_cast<int64_t>(none->targets().nbytes()));
  const std::vector<Batch> expected = epoch(memory), actual = epoch(none);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t b = 0; b < expected.size(); ++b) {
    EXPECT_TRUE(torch::equal(actual[b].inputs, expected[b].inputs)) << "batch " << b;
    EXPECT_TRUE(torch::equal(actual[b].targets, expected[b].targets)) << "batch " << b;
  }
}

TEST_F(ImageFolder, JpegsDecodeCloseToTheirPixels) {
  // A smooth image: JPEG at quality 100 keeps it within a few levels on average (its 4:2:0 chroma blurs the
  // colours a little more); swapped channels or rows would be off by tens.
  const torch::Tensor ramp = torch::arange(0, 16 * 16, torch::kInt64).reshape({16, 16}).mul(255).div(255);
  const torch::Tensor rgb = torch::stack({ramp, ramp.t(), ramp.flip(0)}).to(torch::kUInt8);
  write(TensorDataset(three_classes(3, {3, 16, 16}), rgb.unsqueeze(0).repeat({3, 1, 1, 1}).contiguous(),
                      torch::arange(3, torch::kInt64)),
        ImageFormat::kJpeg);
  EXPECT_TRUE(fs::is_regular_file(file("train/0/0.jpg")));
  const auto train = make_dataset(folder(), Split::kTrain, 0);
  ASSERT_EQ(train->info().input_shape, (std::vector<int64_t>{3, 16, 16}));
  const torch::Tensor error = (train->inputs()[0].to(torch::kInt32) - rgb.to(torch::kInt32)).abs();
  EXPECT_LE(error.to(torch::kFloat32).mean().item<float>(), 3.0f);
  EXPECT_LE(error.max().item<int>(), 24);
}

TEST_F(ImageFolder, ChannelsFollowTheFirstImageUnlessSet) {
  write(images(6, {3, 4, 4}, 3));
  EXPECT_EQ(make_dataset(folder(), Split::kTrain, 0)->info().input_shape, (std::vector<int64_t>{3, 4, 4}));
  config::DataConfig grey = folder();
  grey.channels = 1;
  EXPECT_EQ(make_dataset(grey, Split::kTrain, 0)->inputs().sizes(), (std::vector<int64_t>{6, 1, 4, 4}));

  TempDir other("image-folder-grey");
  const TensorDataset made = images(6, {1, 4, 4}, 4);
  write(made, ImageFormat::kPng, other.path());
  config::DataConfig rgb = folder();
  rgb.root = other.path().string();
  rgb.channels = 3;
  const auto train = make_dataset(rgb, Split::kTrain, 0);
  ASSERT_EQ(train->info().input_shape, (std::vector<int64_t>{3, 4, 4}));
  for (int64_t c = 0; c < 3; ++c) EXPECT_TRUE(torch::equal(train->inputs().select(1, c), made.inputs().select(1, 0)));
}

// JPEGs much larger than data.image_size are downscaled by the decoder first (its 1/8 DCT scaling here).
TEST_F(ImageFolder, ImageSizeResizesEveryImage) {
  TempDir jpeg("image-folder-jpeg");
  const TensorDataset flat(three_classes(3, {1, 64, 48}), torch::full({3, 1, 64, 48}, 100, torch::kUInt8),
                           torch::arange(3, torch::kInt64));
  write(flat);
  write(flat, ImageFormat::kJpeg, jpeg.path());
  for (const fs::path& root : {dir_.path(), jpeg.path()}) {
    for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
      config::DataConfig config = folder(cache);
      config.root = root.string();
      config.image_size = {8};
      const auto train = make_dataset(config, Split::kTrain, 0);
      EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{1, 8, 8}));
      std::vector<uint8_t> pixels(64);
      train->read_image(2, pixels.data());
      for (uint8_t pixel : pixels) EXPECT_NEAR(pixel, 100, 1) << root;
    }
  }
}

TEST_F(ImageFolder, ImageSizeTakesHeightAndWidth) {
  write(images(6, {1, 12, 16}, 18));
  config::DataConfig config = folder();
  config.image_size = {6, 4};
  const auto train = make_dataset(config, Split::kTrain, 0);
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{1, 6, 4}));
  EXPECT_EQ(train->inputs().sizes(), (std::vector<int64_t>{6, 1, 6, 4}));
  config.image_size = {0};  // as stored, as before lists
  EXPECT_EQ(make_dataset(config, Split::kTrain, 0)->info().input_shape, (std::vector<int64_t>{1, 12, 16}));
}

TEST_F(ImageFolder, MixedSizesNeedImageSize) {
  write(images(6, {1, 4, 4}, 5));
  TempDir other("image-folder-wide");
  write(images(3, {1, 4, 6}, 6), ImageFormat::kPng, other.path());
  fs::copy_file(other / "train/dog/1.png", file("train/dog/9.png"));
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    const std::string message = error(folder(cache));
    EXPECT_NE(message.find(file("train/dog/9.png").string() + ": the image is 6x4, not 4x4"), std::string::npos)
        << message;
    EXPECT_NE(message.find("set data.image_size"), std::string::npos) << message;
  }
  config::DataConfig resized = folder();
  resized.image_size = {4};
  EXPECT_EQ(make_dataset(resized, Split::kTrain, 0)->info().samples, 7);
}

TEST_F(ImageFolder, AnUnreadableImageIsNamedAtStartOrInItsBatch) {
  write(images(6, {1, 4, 4}, 7));
  std::ofstream(file("train/dog/2.png")) << "not a png";
  EXPECT_NE(error(folder()).find(file("train/dog/2.png").string() + ": not a readable PNG"), std::string::npos)
      << error(folder());
  config::DataConfig per_batch = folder(config::ImageCache::kNone);
  per_batch.image_size = {4};  // no header read at start: the batch meets the file first
  const auto lazy = make_dataset(per_batch, Split::kTrain, 0);
  std::string message = "no DataError";
  try {
    epoch(lazy);
  } catch (const DataError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(file("train/dog/2.png").string()), std::string::npos) << message;
}

TEST_F(ImageFolder, AnEmptyFileIsNamedAsEmpty) {
  write(images(6, {1, 4, 4}, 19));
  std::ofstream(file("train/dog/9.png")).close();
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    EXPECT_NE(error(folder(cache)).find(file("train/dog/9.png").string() + ": the file is empty (0 bytes)"),
              std::string::npos)
        << error(folder(cache));
  }
}

TEST_F(ImageFolder, ATruncatedJpegIsAnError) {
  write(images(6, {3, 8, 8}, 8), ImageFormat::kJpeg);
  const fs::path cut = file("train/eel/5.jpg");
  fs::resize_file(cut, fs::file_size(cut) - 20);  // the end of the compressed pixels
  EXPECT_NE(error(folder()).find(cut.string() + ": the JPEG cannot be decoded"), std::string::npos) << error(folder());
}

TEST_F(ImageFolder, BadLayoutsAreNamed) {
  EXPECT_NE(error(folder()).find(file("train").string() + " is not a directory. It must hold one folder per class"),
            std::string::npos)
      << error(folder());
  config::DataConfig no_root = folder();
  no_root.root.clear();
  EXPECT_NE(error(no_root).find("data.root is empty"), std::string::npos) << error(no_root);

  write(images(6, {1, 4, 4}, 9));
  fs::create_directories(file("train/fox"));
  std::ofstream(file("train/fox/notes.txt")) << "no image";
  EXPECT_NE(error(folder()).find("the class folder " + file("train/fox").string() + " holds no .png"),
            std::string::npos)
      << error(folder());
  fs::remove_all(file("train/fox"));

  fs::create_directories(file("test/gnu"));
  fs::copy_file(file("test/cat/0.png"), file("test/gnu/0.png"));
  EXPECT_NE(error(folder(), Split::kTest).find("is a class the training split"), std::string::npos)
      << error(folder(), Split::kTest);
  fs::remove_all(file("test/gnu"));

  fs::copy_file(file("train/cat/0.png"), file("train/stray.png"));
  EXPECT_NE(error(folder()).find("train/stray.png is in no class folder"), std::string::npos) << error(folder());
}

TEST_F(ImageFolder, ALinkBackToAFolderBeingListedIsALoopNamedNotFollowedForever) {
  write(images(6, {1, 4, 4}, 14));
  fs::create_directories(file("train/dog/deep"));
  fs::create_directory_symlink(file("train/dog"), file("train/dog/deep/up"));
  EXPECT_NE(error(folder()).find(file("train/dog/deep/up").string() + " leads back to " + file("train/dog").string() +
                                 ", a folder it is inside: a directory loop"),
            std::string::npos)
      << error(folder());
  fs::remove(file("train/dog/deep/up"));
  // A link to a folder outside the one listed is followed: its images count once.
  fs::create_directory_symlink(file("test/cat"), file("train/dog/deep/linked"));
  EXPECT_EQ(make_dataset(folder(), Split::kTrain, 0)->info().samples, 8);
}

TEST_F(ImageFolder, AFifoOrDanglingLinkNamedAsAnImageIsRefusedUnread) {
  const TensorDataset made = images(6, {1, 4, 4}, 15);
  write(made);
  // Opened for reading, a FIFO would wait for a writer forever.
  ASSERT_EQ(::mkfifo(file("train/dog/x.png").c_str(), 0600), 0);
  EXPECT_NE(error(folder()).find(file("train/dog/x.png").string() + ": is not a regular file (a FIFO)"),
            std::string::npos)
      << error(folder());
  std::string message = "no DataError";
  try {
    read_prediction_inputs(file("train/dog").string(), folder(), made.info());
  } catch (const DataError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("x.png: is not a regular file (a FIFO)"), std::string::npos) << message;
  fs::remove(file("train/dog/x.png"));
  fs::create_symlink(file("nowhere.png"), file("train/dog/x.png"));
  EXPECT_NE(error(folder()).find(file("train/dog/x.png").string() + ": no such file"), std::string::npos)
      << error(folder());
}

// How jpeg_bytes encodes: colour space (JCS_RGB input is stored as YCbCr),
// quality, progressive scans, a restart marker every `restart_rows` MCU rows.
struct JpegKind {
  J_COLOR_SPACE space = JCS_RGB;
  int quality = 90;
  bool progressive = false;
  int restart_rows = 0;
};

// The JPEG libjpeg writes of `side` x `side` interleaved pixels (3 bytes a pixel, 4 in CMYK).
std::string jpeg_bytes(const std::vector<uint8_t>& pixels, int side, const JpegKind& kind) {
  jpeg_compress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(side);
  info.image_height = static_cast<JDIMENSION>(side);
  info.input_components = kind.space == JCS_CMYK ? 4 : 3;
  info.in_color_space = kind.space;
  jpeg_set_defaults(&info);
  if (kind.space == JCS_CMYK) jpeg_set_colorspace(&info, JCS_CMYK);
  jpeg_set_quality(&info, kind.quality, TRUE);
  if (kind.progressive) jpeg_simple_progression(&info);
  info.restart_in_rows = kind.restart_rows;
  jpeg_start_compress(&info, TRUE);
  const auto row_bytes = static_cast<std::size_t>(side * info.input_components);
  while (info.next_scanline < info.image_height) {
    JSAMPROW rows[] = {const_cast<uint8_t*>(pixels.data()) + row_bytes * info.next_scanline};
    jpeg_write_scanlines(&info, rows, 1);
  }
  jpeg_finish_compress(&info);
  std::string bytes(reinterpret_cast<const char*>(buffer), size);
  jpeg_destroy_compress(&info);
  std::free(buffer);
  return bytes;
}

// A `side` x `side` CMYK JPEG of one colour, as Photoshop writes them: an Adobe
// marker, and inverted values (255: no ink).
void write_cmyk_jpeg(const fs::path& file, int side, const std::array<uint8_t, 4>& stored) {
  std::vector<uint8_t> pixels;
  for (int p = 0; p < side * side; ++p) pixels.insert(pixels.end(), stored.begin(), stored.end());
  gputrain::testing::write_text(file, jpeg_bytes(pixels, side, {JCS_CMYK, 95}));
}

// Issue 62 #7: a FIFO put in an image's place after the start-up checks
// (data.cache: none) fails the epoch's read at once, naming the sample and
// the file, instead of waiting for a writer forever. Without the check, the
// writer this test starts lets a blocked read end (on an empty file), so the
// test fails rather than hangs.
TEST_F(ImageFolder, AFifoPutInAnImagesPlaceDuringARunFailsItsReadAtOnce) {
  write(images(6, {1, 4, 4}, 16));
  const auto lazy = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);
  const fs::path replaced = file("train/dog/2.png");  // sample 2: cat/0, cat/1, dog/2, ...
  fs::remove(replaced);
  ASSERT_EQ(::mkfifo(replaced.c_str(), 0600), 0);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done.load()) {
      const int fd = ::open(replaced.c_str(), O_WRONLY | O_NONBLOCK);  // ENXIO while no one reads
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::string message = "no DataError";
  try {
    epoch(lazy);
  } catch (const DataError& e) {
    message = e.what();
  }
  done = true;
  writer.join();
  EXPECT_NE(message.find("image_folder sample 2: " + replaced.string() + ": is not a regular file (a FIFO)"),
            std::string::npos)
      << message;
}

// A `side` x `side` RGB photo as a JPEG, progressive or with a restart marker every `restart_rows` MCU rows.
std::string rgb_jpeg(int side, bool progressive, int restart_rows) {
  const torch::Tensor pixels = gputrain::testing::photo(3, side, side, 3).permute({1, 2, 0}).contiguous();
  const std::vector<uint8_t> interleaved(pixels.const_data_ptr<uint8_t>(),
                                         pixels.const_data_ptr<uint8_t>() + pixels.numel());
  return jpeg_bytes(interleaved, side, {JCS_RGB, 90, progressive, restart_rows});
}

// Issue 62 #13: a JPEG cut inside its scan but ending with an EOI marker
// decodes partly grey in libjpeg, with a "premature end of data segment"
// warning; it is an error naming the file at start, per batch and in
// predict alike, while progressive, restart-marked and CMYK files still read.
TEST_F(ImageFolder, AJpegCutInsideItsScanAndEndedWithItsEoiIsAnErrorEverywhere) {
  const TensorDataset made = images(6, {3, 32, 32}, 21);
  write(made, ImageFormat::kJpeg);
  gputrain::testing::write_text(file("train/cat/0.jpg"), rgb_jpeg(32, /*progressive=*/true, 0));
  gputrain::testing::write_text(file("train/cat/1.jpg"), rgb_jpeg(32, /*progressive=*/false, /*restart_rows=*/1));
  write_cmyk_jpeg(file("train/dog/2.jpg"), 32, {255, 64, 128, 255});
  EXPECT_EQ(make_dataset(folder(), Split::kTrain, 0)->info().samples, 6) << "valid files refused";

  const fs::path cut = file("train/eel/5.jpg");
  const std::string whole = rgb_jpeg(32, false, 0);
  const std::size_t scan = whole.rfind("\xFF\xDA");
  ASSERT_NE(scan, std::string::npos);
  gputrain::testing::write_text(cut, whole.substr(0, scan + (whole.size() - scan) / 2) + "\xFF\xD9");
  const std::string at_start = error(folder());
  EXPECT_NE(at_start.find(cut.string() + ": the JPEG cannot be decoded (Corrupt JPEG data: premature end of data "
                                         "segment)"),
            std::string::npos)
      << at_start;
  std::string per_batch = "no DataError", predicted = "no DataError";
  try {
    epoch(make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0));
  } catch (const DataError& e) {
    per_batch = e.what();
  }
  EXPECT_NE(per_batch.find("image_folder sample 5: " + cut.string() + ": the JPEG cannot be decoded"),
            std::string::npos)
      << per_batch;
  try {
    read_prediction_inputs(cut.string(), folder(), made.info());
  } catch (const DataError& e) {
    predicted = e.what();
  }
  EXPECT_NE(predicted.find(cut.string() + ": the JPEG cannot be decoded"), std::string::npos) << predicted;
}

// libjpeg converts no CMYK to RGB ("Unsupported color conversion request"); the folder reader does.
TEST_F(ImageFolder, CmykJpegsDecodeToRgbAndGrey) {
  for (const int64_t channels : {3, 1}) {
    SCOPED_TRACE(channels);
    const TensorDataset made = images(6, {channels, 8, 8}, 17);
    write(made, ImageFormat::kJpeg);
    write_cmyk_jpeg(file("print.jpg"), 8, {255, 64, 128, 255});  // inverted: cyan 0, magenta 75%, yellow 50%, no black
    const PredictionInputs read = read_prediction_inputs(file("print.jpg").string(), folder(), made.info());
    const torch::Tensor pixels = read.dataset->inputs().to(torch::kInt32);
    const torch::Tensor expected =
        channels == 3 ? torch::tensor({255, 64, 128}, torch::kInt32).view({1, 3, 1, 1})
                      : torch::full({1, 1, 1, 1}, (299 * 255 + 587 * 64 + 114 * 128) / 1000, torch::kInt32);
    EXPECT_LE((pixels - expected).abs().max().item<int>(), 4) << pixels;
    fs::remove_all(dir_.path());
    fs::create_directories(dir_.path());
  }
}

// Sets the height and width a JPEG's baseline frame header (SOF0) states.
void state_jpeg_size(const fs::path& jpeg, uint16_t height, uint16_t width) {
  std::string bytes = gputrain::testing::read_text(jpeg);
  const std::size_t frame = bytes.find("\xFF\xC0");
  ASSERT_NE(frame, std::string::npos);
  const std::size_t size_at = frame + 2 + 2 + 1;  // marker, segment length, sample precision
  const char stated[] = {static_cast<char>(height >> 8), static_cast<char>(height & 0xFF),
                         static_cast<char>(width >> 8), static_cast<char>(width & 0xFF)};
  bytes.replace(size_at, 4, stated, 4);
  gputrain::testing::write_text(jpeg, bytes);
}

TEST_F(ImageFolder, ImagesAboveMaxImagePixelsAreRefusedBeforeDecoding) {
  write(images(6, {3, 8, 8}, 16), ImageFormat::kJpeg);
  // A few hundred bytes claiming 65500 x 65500 pixels: 12 GB decoded.
  state_jpeg_size(file("train/dog/2.jpg"), 65500, 65500);
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    const std::string message = error(folder(cache));
    EXPECT_NE(message.find(file("train/dog/2.jpg").string() +
                           ": the image is 65500x65500, 4290250000 pixels, more than data.max_image_pixels (89478485)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("Raise data.max_image_pixels"), std::string::npos) << message;
  }
  fs::remove(file("train/dog/2.jpg"));
  TempDir other("image-folder-large");
  write(images(3, {3, 16, 16}, 17), ImageFormat::kJpeg, other.path());
  fs::copy_file(other / "train/cat/0.jpg", file("train/eel/9.jpg"));
  // Each way an image is decoded: at start, per batch (after resizing) and for predict.
  config::DataConfig limited = folder();
  limited.max_image_pixels = 255;
  EXPECT_NE(error(limited).find(file("train/eel/9.jpg").string() +
                                ": the image is 16x16, 256 pixels, more than data.max_image_pixels (255)"),
            std::string::npos)
      << error(limited);
  limited.cache = config::ImageCache::kNone;
  limited.image_size = {8};
  const auto lazy = make_dataset(limited, Split::kTrain, 0);
  std::vector<uint8_t> pixels(3 * 8 * 8);
  EXPECT_THROW(lazy->read_image(5, pixels.data()), DataError);
  EXPECT_THROW(read_prediction_inputs(file("train/eel").string(), limited, lazy->info()), DataError);
  limited.cache = config::ImageCache::kMemory;
  limited.max_image_pixels = 256;
  EXPECT_EQ(make_dataset(limited, Split::kTrain, 0)->info().samples, 6);
}

TEST_F(ImageFolder, TestRootReplacesRootTest) {
  write(images(6, {1, 4, 4}, 10));
  fs::rename(file("test"), file("elsewhere"));
  config::DataConfig config = folder();
  EXPECT_NE(error(config, Split::kTest).find("is not a directory"), std::string::npos);
  config.test_root = file("elsewhere").string();
  EXPECT_EQ(make_dataset(config, Split::kTest, 0)->info().samples, 6);
}

TEST_F(ImageFolder, TheDeviceCacheNeedsTheImagesInMemory) {
  write(images(6, {1, 4, 4}, 11));
  const auto lazy = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);
  EXPECT_FALSE(choose_device_cache(config::Switch::kAuto, *lazy, -1, torch::kCPU).on);
  EXPECT_THROW(choose_device_cache(config::Switch::kOn, *lazy, -1, torch::kCPU), DataError);
  EXPECT_TRUE(
      choose_device_cache(config::Switch::kAuto, *make_dataset(folder(), Split::kTrain, 0), -1, torch::kCPU).on);
}

TEST_F(ImageFolder, ExportRefusesAnExistingSplitAndSetsWithoutImages) {
  const TensorDataset made = images(6, {1, 4, 4}, 12);
  export_images(made, dir_.path(), Split::kTrain, ImageFormat::kPng, 95, false);
  EXPECT_THROW(export_images(made, dir_.path(), Split::kTrain, ImageFormat::kPng, 95, false), DataError);
  DatasetInfo info;
  info.name = "table";
  info.samples = 2;
  info.input_shape = {3};
  info.classes = 2;
  EXPECT_THROW(export_images(TensorDataset(info, torch::zeros({2, 3}), torch::zeros({2}, torch::kInt64)), dir_.path(),
                             Split::kTest, ImageFormat::kPng, 95, false),
               DataError);
  EXPECT_FALSE(fs::exists(file("test")));
}

// What is logged while `body` runs.
std::string logged(const std::function<void()>& body) {
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  try {
    body();
  } catch (...) {
    spdlog::set_default_logger(previous);
    throw;
  }
  spdlog::set_default_logger(previous);
  return log.str();
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// Issue 41: greyscale and CMYK JPEGs in an RGB set are converted, each kind
// logged once (naming the first file met), not once per image.
TEST_F(ImageFolder, GreyAndCmykJpegsInAnRgbSetAreConvertedAndLoggedOnce) {
  write(images(6, {3, 8, 8}, 31), ImageFormat::kJpeg);
  TempDir grey("image-folder-grey");
  write(images(6, {1, 8, 8}, 32), ImageFormat::kJpeg, grey.path());
  for (const char* name : {"cat/0.jpg", "cat/1.jpg", "dog/2.jpg"}) {
    fs::copy_file(grey / "train" / name, file("train/dog/g") += fs::path(name).filename());
  }
  write_cmyk_jpeg(file("train/eel/c0.jpg"), 8, {255, 64, 128, 255});
  write_cmyk_jpeg(file("train/eel/c1.jpg"), 8, {0, 0, 0, 0});
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    SCOPED_TRACE(cache == config::ImageCache::kMemory ? "memory" : "none");
    std::vector<Batch> batches;
    const std::string log = logged([&] { batches = epoch(make_dataset(folder(cache), Split::kTrain, 0)); });
    int64_t samples = 0;
    for (const Batch& b : batches) samples += b.size();
    EXPECT_EQ(samples, 11);
    EXPECT_EQ(occurrences(log, "is stored in greyscale, converted to RGB"), 1u) << log;
    EXPECT_EQ(occurrences(log, "is stored in CMYK, converted to RGB"), 1u) << log;
    EXPECT_NE(log.find("other greyscale images are converted alike without a line each"), std::string::npos) << log;
  }
  // A grey image becomes three equal channels.
  const auto train = make_dataset(folder(), Split::kTrain, 0);
  const torch::Tensor converted = train->inputs()[4];  // train/dog/g0.jpg, after dog's 2.jpg and 3.jpg
  ASSERT_NE(train->describe_sample(4).find("g0.jpg"), std::string::npos) << train->describe_sample(4);
  EXPECT_TRUE(torch::equal(converted[0], converted[1]) && torch::equal(converted[1], converted[2]));
}

// Issue 41: under data.skip_bad_images a corrupt, a truncated, an empty and an
// oversized image are each logged and left out (the first training image
// among them: the next readable one sets the shape), with their names kept
// for the run's summary; without it the first is an error naming it.
TEST_F(ImageFolder, SkipBadImagesLeavesOutUnreadableFilesAndNamesThem) {
  const TensorDataset made = images(9, {3, 8, 8}, 33);
  write(made, ImageFormat::kJpeg);
  std::ofstream(file("train/cat/0.jpg")) << "not a jpeg";
  state_jpeg_size(file("train/dog/3.jpg"), 20000, 20000);  // 400 million pixels
  fs::resize_file(file("train/dog/4.jpg"), fs::file_size(file("train/dog/4.jpg")) - 20);
  std::ofstream(file("train/eel/8.jpg")).close();
  EXPECT_NE(error(folder()).find(file("train/cat/0.jpg").string() + ": not a readable JPEG"), std::string::npos)
      << error(folder());
  const std::vector<std::string> bad{file("train/cat/0.jpg").string(), file("train/dog/3.jpg").string(),
                                     file("train/dog/4.jpg").string(), file("train/eel/8.jpg").string()};
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    SCOPED_TRACE(cache == config::ImageCache::kMemory ? "memory" : "none");
    config::DataConfig skipping = folder(cache);
    skipping.skip_bad_images = true;
    std::shared_ptr<const Dataset> train;
    const std::string log = logged([&] { train = make_dataset(skipping, Split::kTrain, 0); });
    EXPECT_EQ(train->info().skipped, bad);
    EXPECT_EQ(train->info().samples, 5);
    EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{3, 8, 8}));
    EXPECT_TRUE(torch::equal(train->targets(), torch::tensor({0, 0, 1, 2, 2}, torch::kInt64)));
    for (const std::string& name : bad) EXPECT_NE(log.find(name), std::string::npos) << name << "\n" << log;
    EXPECT_NE(log.find("more than data.max_image_pixels (89478485)"), std::string::npos) << log;
    EXPECT_NE(log.find("the file is empty (0 bytes), no image; left out (data.skip_bad_images)"), std::string::npos)
        << log;
    EXPECT_NE(log.find("4 images of " + file("train").string() + " left out as unreadable"), std::string::npos) << log;
    std::vector<uint8_t> pixels(3 * 8 * 8);
    EXPECT_NE(train->describe_sample(0).find("train/cat/1.jpg"), std::string::npos);
    train->read_image(4, pixels.data());  // the last kept: train/eel/7.jpg
    EXPECT_EQ(make_dataset(skipping, Split::kTest, 0)->info().skipped.size(), 0u);
  }
}

// Every image left out by data.skip_bad_images (here each over data.max_image_pixels) is said as such, not as
// the last file's own error, which read as if the key had not been set.
TEST_F(ImageFolder, SkipBadImagesWithEveryImageUnreadableSaysNoneCanBeRead) {
  write(images(6, {1, 8, 8}, 34));
  config::DataConfig skipping = folder();
  skipping.skip_bad_images = true;
  skipping.max_image_pixels = 63;
  const std::string what = error(skipping);
  EXPECT_NE(what.find("none of the 6 images in " + file("train").string() +
                      " can be read (data.skip_bad_images left every one out); the first: " +
                      file("train/cat/0.png").string() + ": the image is 8x8, 64 pixels, more than"),
            std::string::npos)
      << what;
}

// An image that cannot be read stops the split with the way on: replace or remove it, or set
// data.skip_bad_images; read per batch (data.cache: none), then continue the run. A 12-bit JPEG, which
// libjpeg-turbo's 8-bit build cannot read, says so and how to convert it.
TEST_F(ImageFolder, AnImageThatCannotBeReadSaysHowToGoOn) {
  write(images(6, {1, 8, 8}, 36), ImageFormat::kJpeg);
  std::string bytes = gputrain::testing::read_text(file("train/dog/2.jpg"));
  const std::size_t frame = bytes.find("\xFF\xC0");  // the frame header: length (2 bytes), then the precision
  ASSERT_NE(frame, std::string::npos);
  bytes[frame + 4] = 12;
  std::ofstream(file("train/dog/2.jpg"), std::ios::binary) << bytes;
  for (const auto cache : {config::ImageCache::kMemory, config::ImageCache::kNone}) {
    const std::string what = error(folder(cache));
    EXPECT_NE(what.find(file("train/dog/2.jpg").string()), std::string::npos) << what;
    EXPECT_NE(what.find("(Unsupported JPEG data precision 12: a 12-bit JPEG, and gputrain reads 8-bit ones; convert "
                        "it to 8 bits or to PNG"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("; replace or remove the file, or set data.skip_bad_images: true to leave out the images that "
                        "cannot be read"),
              std::string::npos)
        << what;
  }
  fs::remove(file("train/dog/2.jpg"));
  const auto train = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);
  fs::remove(file("train/eel/5.jpg"));  // after the split was opened
  std::vector<uint8_t> pixels(8 * 8);
  try {
    train->read_image(4, pixels.data());
    ADD_FAILURE() << "read";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("image_folder sample 4: " + file("train/eel/5.jpg").string() +
                                         ": cannot open: No such file or directory; replace or remove the file"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("then continue the run with --resume auto"), std::string::npos) << e.what();
  }
}

// The test split takes its size from the training split's first class folder: that folder emptied (its images
// moved away) is named, not an internal error (std::out_of_range) from the empty list.
TEST_F(ImageFolder, ATestSplitWhoseFirstTrainingClassFolderIsEmptyNamesIt) {
  write(images(6, {1, 8, 8}, 35));
  for (const auto& entry : fs::directory_iterator(file("train/cat"))) fs::remove(entry.path());
  const std::string what = error(folder(), Split::kTest);
  EXPECT_NE(what.find("the class folder " + file("train/cat").string() + " holds no .png, .jpg or .jpeg images"),
            std::string::npos)
      << what;
}

// Issue 41: data.resize and data.center_crop (torchvision's Resize(n), then
// CenterCrop) bring images of any size to the crop's, on the test split and on
// the training split unless data.augment.random_resized_crop is set: that
// split keeps data.image_size, whose images its boxes are cut from.
TEST_F(ImageFolder, ResizeAndCenterCropApplyToTheTestSplitAndToTrainingWithoutTheRandomCrop) {
  const TensorDataset made = images(6, {3, 20, 30}, 41);
  write(made);
  TempDir other("image-folder-tall");
  write(images(3, {3, 16, 12}, 42), ImageFormat::kPng, other.path());
  fs::copy_file(other / "train/cat/0.png", file("train/eel/t.png"));  // tall, after eel's 4.png and 5.png
  const torch::Tensor wide = made.inputs()[0];
  const torch::Tensor centred = detail::center_crop(detail::resized_crop(wide, {0, 0, 20, 30}, 10, 15), 8, 8);
  config::DataConfig config = folder();
  config.resize = 10;
  config.center_crop = {8};
  for (const Split split : {Split::kTrain, Split::kTest}) {
    const auto set = make_dataset(config, split, 0);
    EXPECT_EQ(set->info().input_shape, (std::vector<int64_t>{3, 8, 8}));
    EXPECT_TRUE(torch::equal(set->inputs()[0], centred));
  }
  EXPECT_EQ(make_dataset(config, Split::kTrain, 0)->info().samples, 7);

  config.augment.random_resized_crop.size = 8;
  config.image_size = {8};
  const auto squeezed = make_dataset(config, Split::kTrain, 0);
  EXPECT_TRUE(torch::equal(squeezed->inputs()[0], detail::resized_crop(wide, {0, 0, 20, 30}, 8, 8)));
  EXPECT_TRUE(torch::equal(make_dataset(config, Split::kTest, 0)->inputs()[0], centred));
  config.image_size = {};
  EXPECT_NE(error(config).find("set data.image_size to resize them all"), std::string::npos) << error(config);

  config.augment.random_resized_crop.size = 0;
  config.center_crop = {};  // 20 x 30 -> 10 x 15, but 16 x 12 -> 13 x 10
  EXPECT_NE(error(config).find(file("train/eel/t.png").string() +
                               ": the image is 10x13 after data.resize, not 15x10 as the data set's; set "
                               "data.center_crop to crop them to one size"),
            std::string::npos)
      << error(config);
}

// Smooth 3 x 96 x 128 photos (gradients and a few discs) as JPEGs: what
// JPEG keeps well, so that decodes compare closely.
TensorDataset smooth_photos(int64_t count) {
  const torch::Tensor y = torch::arange(96, torch::kFloat32).view({96, 1}).expand({96, 128});
  const torch::Tensor x = torch::arange(128, torch::kFloat32).view({1, 128}).expand({96, 128});
  std::vector<torch::Tensor> photos;
  for (int64_t i = 0; i < count; ++i) {
    const auto k = static_cast<float>(i + 1);
    const torch::Tensor disc = ((y - 10 * k).square() + (x - 17 * k).square() < 400).to(torch::kFloat32) * 90;
    photos.push_back(torch::stack({y * 2 + disc, x * 1.5f + 20 * k, (x + y) + disc / 2}).clamp(0, 255));
  }
  return TensorDataset(three_classes(count, {3, 96, 128}), torch::stack(photos).round().to(torch::kUInt8),
                       torch::arange(count, torch::kInt64).remainder(3));
}

// Mean and largest absolute difference of two uint8 images.
std::pair<float, int> difference(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor d = (a.to(torch::kInt32) - b.to(torch::kInt32)).abs();
  return {d.to(torch::kFloat32).mean().item<float>(), d.max().item<int>()};
}

config::DataConfig ImageFolder::cropped_photos(int64_t count) {
  write(smooth_photos(count), ImageFormat::kJpeg);
  config::DataConfig config = folder(config::ImageCache::kNone);
  config.image_size = {16};
  config.augment.random_resized_crop.size = 16;
  return config;
}

// Under data.cache: none the random resized crop's box is drawn on the file's
// own size and only the box is decoded: at the stored scale the pixels are
// those of the whole decode, cropped and resized; where the box is large
// enough, libjpeg-turbo's DCT scaling decodes it smaller first, and the result
// stays close to the whole decode's.
TEST_F(ImageFolder, TheRandomResizedCropDecodesOnlyTheBoxOfTheStoredJpeg) {
  const config::DataConfig config = cropped_photos(3);
  const auto whole = make_dataset(folder(), Split::kTrain, 0);  // decoded at start, stored size
  ASSERT_EQ(whole->info().input_shape, (std::vector<int64_t>{3, 96, 128}));
  const auto boxed = make_dataset(config, Split::kTrain, 0);
  ASSERT_FALSE(boxed->resident());
  const auto crop = [&](int64_t index, CropBox box) {
    torch::Tensor out = torch::empty({3, 16, 16}, torch::kUInt8);
    boxed->read_resized_crop(
        index,
        [&](int64_t height, int64_t width) {
          EXPECT_EQ(height, 96);
          EXPECT_EQ(width, 128);
          return box;
        },
        out.data_ptr<uint8_t>());
    return out;
  };
  for (int64_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    // Not on an iMCU boundary, rows skipped above and left below: decoded at scale 1.
    const CropBox small{13, 21, 20, 24};
    EXPECT_TRUE(torch::equal(crop(i, small), detail::resized_crop(whole->inputs()[i], small, 16, 16)));
    const CropBox corner{76, 108, 20, 20};
    EXPECT_TRUE(torch::equal(crop(i, corner), detail::resized_crop(whole->inputs()[i], corner, 16, 16)));
    // 64 x 96 towards 16 x 16: decoded at 1/4.
    const CropBox large{8, 16, 64, 96};
    const auto [mean, largest] = difference(crop(i, large), detail::resized_crop(whole->inputs()[i], large, 16, 16));
    EXPECT_LE(mean, 2.0f);
    EXPECT_LE(largest, 24);
  }
}

// Sharp colour edges everywhere (noise, 4:2:0 JPEGs): a box decoded at the
// stored scale, wherever it starts (on an iMCU boundary or not, at the
// image's edges), holds exactly the whole decode's pixels: libjpeg-turbo's
// chroma upsampling at the decoded region's edges stays outside the box.
TEST_F(ImageFolder, ABoxDecodedAtTheStoredScaleHasTheWholeDecodesPixels) {
  write(images(3, {3, 48, 56}, 9), ImageFormat::kJpeg);
  const auto whole = make_dataset(folder(), Split::kTrain, 0);
  config::DataConfig config = folder(config::ImageCache::kNone);
  config.image_size = {16};
  config.augment.random_resized_crop.size = 16;
  const auto boxed = make_dataset(config, Split::kTrain, 0);
  int64_t boxes = 0;
  for (int64_t i = 0; i < 3; ++i) {
    for (const int64_t top : {0, 1, 7, 8, 9, 15, 16, 17, 29}) {
      for (const int64_t left : {0, 3, 8, 16, 23, 37}) {
        const CropBox box{top, left, 19, 19};  // 19 / 2 < 16: decoded at scale 1
        torch::Tensor out = torch::empty({3, 16, 16}, torch::kUInt8);
        boxed->read_resized_crop(
            i, [&](int64_t, int64_t) { return box; }, out.data_ptr<uint8_t>());
        ASSERT_TRUE(torch::equal(out, detail::resized_crop(whole->inputs()[i], box, 16, 16)))
            << "image " << i << " box at " << top << ", " << left << ": largest difference "
            << difference(out, detail::resized_crop(whole->inputs()[i], box, 16, 16)).second;
        ++boxes;
      }
    }
  }
  EXPECT_EQ(boxes, 162);
}

// The host loader draws each box on the file's stored size, from the sample's
// stream (draw_crop_box), not on data.image_size.
TEST_F(ImageFolder, TheLoaderDrawsEachBoxOnTheFilesStoredSize) {
  const config::DataConfig config = cropped_photos(6);
  const auto dataset = make_dataset(config, Split::kTrain, 0);
  LoaderOptions options = loader_options(config, Split::kTrain, 4, 3);
  options.num_workers = 2;
  HostLoader loader(dataset, options);
  loader.start_epoch(2);
  const std::vector<int64_t> order = detail::epoch_order(options, 6, 2);
  int64_t images = 0;
  while (auto batch = loader.next()) {
    const torch::Tensor bytes = (batch->inputs * 255.0).round().to(torch::kUInt8);
    for (int64_t k = 0; k < batch->size(); ++k) {
      const CropBox box = detail::draw_crop_box(options, options.seed, 2, batch->index, k, 96, 128);
      torch::Tensor expected = torch::empty({3, 16, 16}, torch::kUInt8);
      dataset->read_resized_crop(
          order[static_cast<std::size_t>(batch->index * 4 + k)], [&](int64_t, int64_t) { return box; },
          expected.data_ptr<uint8_t>());
      EXPECT_TRUE(torch::equal(bytes[k], expected)) << "batch " << batch->index << " image " << k;
      ++images;
    }
  }
  EXPECT_EQ(images, 6);
}

// data.decode_threads changes who decodes, not what: the same batches with the
// images decoded, cropped and jittered on the batch's worker or on three decode
// threads, and a corrupt file still named in its batch.
TEST_F(ImageFolder, DecodeThreadsGiveTheSameBatchesAsTheWorkers) {
  config::DataConfig config = cropped_photos(9);
  config.augment.color_jitter = {0.4, 0.4, 0.4, 0.1};
  config.augment.hflip = true;
  const auto dataset = make_dataset(config, Split::kTrain, 0);
  const auto batches = [&](int64_t decode_threads) {
    LoaderOptions options = loader_options(config, Split::kTrain, 4, 5);
    options.num_workers = 2;
    options.decode_threads = decode_threads;
    HostLoader loader(dataset, options);
    loader.start_epoch(1);
    std::vector<torch::Tensor> all;
    while (auto batch = loader.next()) all.push_back(batch->inputs);
    return all;
  };
  const std::vector<torch::Tensor> on_workers = batches(0), on_decoders = batches(3);
  ASSERT_EQ(on_workers.size(), 3U);
  ASSERT_EQ(on_decoders.size(), 3U);
  for (std::size_t b = 0; b < 3; ++b) EXPECT_TRUE(torch::equal(on_workers[b], on_decoders[b])) << "batch " << b;

  std::ofstream(file("train/1/4.jpg"), std::ios::trunc) << "not a jpeg";
  LoaderOptions options = loader_options(config, Split::kTrain, 4, 5);
  options.decode_threads = 3;
  HostLoader loader(dataset, options);
  loader.start_epoch(0);
  try {
    while (loader.next()) {
    }
    ADD_FAILURE() << "the corrupt file was not named";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("4.jpg"), std::string::npos) << e.what();
  }
}

// data.decode: gpu's loader reads each file itself: the set names sample i's
// file (the one read_image decodes for i) only while it reads them per batch.
TEST_F(ImageFolder, EachSampleNamesItsFileOnlyWhileReadPerBatch) {
  write(smooth_photos(4), ImageFormat::kJpeg);
  const auto per_batch = make_dataset(folder(config::ImageCache::kNone), Split::kTrain, 0);
  const std::vector<int64_t>& s = per_batch->info().input_shape;
  for (int64_t i = 0; i < per_batch->info().samples; ++i) {
    const fs::path* file = per_batch->sample_file(i);
    ASSERT_NE(file, nullptr) << i;
    torch::Tensor read = torch::empty(s, torch::kUInt8), direct = torch::empty(s, torch::kUInt8);
    per_batch->read_image(i, read.data_ptr<uint8_t>());
    detail::decode_image(*file, {s[0], s[1], s[2]}, detail::ImageFit{}, 1 << 24, direct.data_ptr<uint8_t>());
    EXPECT_TRUE(torch::equal(read, direct)) << i << ": " << file->string();
  }
  EXPECT_NE(*per_batch->sample_file(0), *per_batch->sample_file(1));
  EXPECT_EQ(make_dataset(folder(), Split::kTrain, 0)->sample_file(0), nullptr);  // held in memory
}

}  // namespace
}  // namespace gputrain::data
