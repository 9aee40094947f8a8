#include "gputrain/data/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "file_bytes.h"
#include "gputrain/common/error.h"
#include "gputrain/data/generate.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::TempDir;
using testing::patch;
using testing::read_bytes;
using testing::write_bytes;

config::DataConfig data_config(config::DatasetName dataset, const fs::path& root = {}) {
  config::DataConfig config;
  config.dataset = dataset;
  config.root = root.string();
  return config;
}

torch::Tensor pixels_of(const ImageSet& set) {
  return torch::from_blob(const_cast<uint8_t*>(set.pixels.data()), {set.size(), set.channels, set.height, set.width},
                          torch::kUInt8);
}

torch::Tensor labels_of(const ImageSet& set) {
  return torch::from_blob(const_cast<uint8_t*>(set.labels.data()), {set.size()}, torch::kUInt8).to(torch::kInt64);
}

// The DataError that loading `config` raises, checked to contain every one of `parts`.
void expect_data_error(const config::DataConfig& config, Split split, const std::vector<std::string>& parts) {
  try {
    make_dataset(config, split, 0);
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void expect_same_images(const Dataset& dataset, const ImageSet& set) {
  ASSERT_EQ(dataset.info().samples, set.size());
  EXPECT_TRUE(dataset.inputs().is_contiguous());
  EXPECT_TRUE(torch::equal(dataset.inputs(), pixels_of(set)));
  EXPECT_TRUE(torch::equal(dataset.targets(), labels_of(set)));
}

class Cifar : public ::testing::Test {
 protected:
  // 23 training records spread 5, 5, 5, 4, 4 over the five files.
  void SetUp() override { write_cifar10_set(dir_.path(), {23, 7, 5}); }
  fs::path file(const std::string& name) const { return dir_ / name; }

  TempDir dir_{"gputrain-cifar"};
};

TEST_F(Cifar, RoundTripsPixelsAndLabelsExactly) {
  const auto train = make_dataset(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTrain, 0);
  expect_same_images(*train, make_image_set(23, 3, 32, 5, Split::kTrain));
  const DatasetInfo& info = train->info();
  EXPECT_EQ(info.name, "cifar10");
  EXPECT_EQ(info.input_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(info.classes, 10);
  EXPECT_TRUE(info.images);
  EXPECT_EQ(info.target_kind, TargetKind::kClasses);
  const auto test = make_dataset(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTest, 0);
  expect_same_images(*test, make_image_set(7, 3, 32, 5, Split::kTest));
}

TEST_F(Cifar, NamesItsClasses) {
  const auto test = make_dataset(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTest, 0);
  EXPECT_EQ(test->info().class_names, (std::vector<std::string>{"airplane", "automobile", "bird", "cat", "deer", "dog",
                                                                "frog", "horse", "ship", "truck"}));
}

TEST_F(Cifar, RecordLayoutIsLabelThenChannelMajorPixels) {
  const std::string bytes = read_bytes(file("data_batch_2.bin"));
  ASSERT_EQ(bytes.size(), 5u * 3073u);
  const ImageSet set = make_image_set(23, 3, 32, 5, Split::kTrain);
  const std::size_t record = 1, sample = 5 + record, c = 2, y = 7, x = 30;
  EXPECT_EQ(static_cast<uint8_t>(bytes[record * 3073]), set.labels[sample]);
  EXPECT_EQ(static_cast<uint8_t>(bytes[record * 3073 + 1 + c * 1024 + y * 32 + x]),
            set.pixels[sample * 3072 + c * 1024 + y * 32 + x]);
}

TEST_F(Cifar, DescribesASampleByFileAndRecord) {
  const auto train = make_dataset(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTrain, 0);
  const std::string where = train->describe_sample(12);
  EXPECT_NE(where.find("cifar10 sample 12"), std::string::npos) << where;
  EXPECT_NE(where.find(file("data_batch_3.bin").string() + ", record 2"), std::string::npos) << where;
}

TEST_F(Cifar, MissingDirectoryIsADataError) {
  expect_data_error(
      data_config(config::DatasetName::kCifar10, dir_ / "nope"), Split::kTrain,
      {(dir_ / "nope").string(), "not a directory", "gputrain datasets download cifar10", "datasets/README.md"});
}

TEST_F(Cifar, MissingFilesAreListed) {
  fs::remove(file("data_batch_3.bin"));
  fs::remove(file("data_batch_5.bin"));
  expect_data_error(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTrain,
                    {"data_batch_3.bin, data_batch_5.bin", "make-cifar"});
  fs::remove(file("test_batch.bin"));
  expect_data_error(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTest, {"lacks test_batch.bin"});
}

TEST_F(Cifar, SizeNotAMultipleOfTheRecordIsADataError) {
  write_bytes(file("data_batch_2.bin"), read_bytes(file("data_batch_2.bin")) + "x");
  expect_data_error(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTrain,
                    {file("data_batch_2.bin").string(), "15366 bytes", "3073-byte records"});
}

TEST_F(Cifar, EmptyFileIsADataError) {
  write_bytes(file("test_batch.bin"), "");
  expect_data_error(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTest,
                    {file("test_batch.bin").string(), "0 bytes"});
}

TEST_F(Cifar, LabelOutOfRangeNamesFileRecordAndSample) {
  patch(file("data_batch_2.bin"), 3 * 3073, "\x0a");
  expect_data_error(data_config(config::DatasetName::kCifar10, dir_.path()), Split::kTrain,
                    {file("data_batch_2.bin").string(), "record 3 (sample 8)", "label 10, outside 0..9"});
}

class Idx : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { write_idx_set(dir_.path(), {31, 9, 3}, gzip()); }
  bool gzip() const { return GetParam(); }
  fs::path file(const std::string& base) const { return dir_ / (base + (gzip() ? ".gz" : "")); }
  config::DataConfig config() const { return data_config(config::DatasetName::kFashionMnist, dir_.path()); }

  TempDir dir_{"gputrain-idx"};
};

TEST_P(Idx, RoundTripsPixelsAndLabelsExactly) {
  EXPECT_TRUE(fs::exists(file("train-images-idx3-ubyte")));
  const auto train = make_dataset(config(), Split::kTrain, 0);
  expect_same_images(*train, make_image_set(31, 1, 28, 3, Split::kTrain));
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(train->info().name, "fashion_mnist");
  const auto test = make_dataset(data_config(config::DatasetName::kMnist, dir_.path()), Split::kTest, 0);
  expect_same_images(*test, make_image_set(9, 1, 28, 3, Split::kTest));
  EXPECT_EQ(test->info().name, "mnist");
}

TEST_P(Idx, FashionMnistNamesItsClassesAndMnistShowsIndices) {
  const auto fashion = make_dataset(config(), Split::kTrain, 0);
  EXPECT_EQ(fashion->info().class_names,
            (std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                                      "Sneaker", "Bag", "Ankle boot"}));
  EXPECT_TRUE(
      make_dataset(data_config(config::DatasetName::kMnist, dir_.path()), Split::kTest, 0)->info().class_names.empty());
}

// data.keep_classes: the kept classes' samples, in order, relabelled by their place in the list, with their names.
TEST_P(Idx, KeepClassesKeepsThoseSamplesRelabelledInTheListsOrder) {
  const auto all = make_dataset(config(), Split::kTrain, 0);
  config::DataConfig kept_config = config();
  kept_config.keep_classes = {7, 2};
  const auto kept = make_dataset(kept_config, Split::kTrain, 0);
  const torch::Tensor labels = all->targets();
  const torch::Tensor rows = torch::nonzero(labels.eq(7).logical_or(labels.eq(2))).squeeze(1);
  ASSERT_GT(rows.size(0), 0);
  EXPECT_EQ(kept->info().samples, rows.size(0));
  EXPECT_EQ(kept->info().classes, 2);
  EXPECT_EQ(kept->info().class_names, (std::vector<std::string>{"Sneaker", "Pullover"}));
  EXPECT_TRUE(torch::equal(kept->inputs(), all->inputs().index_select(0, rows)));
  EXPECT_TRUE(torch::equal(kept->targets(), labels.index_select(0, rows).eq(2).to(torch::kInt64)));
  kept_config.keep_classes = {10};
  EXPECT_THROW(make_dataset(kept_config, Split::kTrain, 0), DataError);
}

TEST_P(Idx, MissingFilesAreNamed) {
  fs::remove(file("train-labels-idx1-ubyte"));
  expect_data_error(config(), Split::kTrain, {"lacks train-labels-idx1-ubyte[.gz]", "dataset-fashion-mnist"});
  expect_data_error(data_config(config::DatasetName::kMnist, dir_ / "nope"), Split::kTrain,
                    {(dir_ / "nope").string(), "make-idx"});
}

TEST_P(Idx, TruncatedFileIsADataError) {
  const fs::path images = file("train-images-idx3-ubyte");
  fs::resize_file(images, fs::file_size(images) / 2);
  expect_data_error(config(), Split::kTrain, {images.string(), gzip() ? "truncated gzip stream" : "truncated"});
}

TEST_P(Idx, TruncatedHeaderIsADataError) {
  const fs::path labels = file("t10k-labels-idx1-ubyte");
  fs::resize_file(labels, gzip() ? 12 : 6);
  expect_data_error(config(), Split::kTest, {labels.string()});
}

INSTANTIATE_TEST_SUITE_P(RawAndGzip, Idx, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Gzip" : "Raw"; });

// Header and content errors, on raw files where the bytes are easy to edit.
class IdxRaw : public ::testing::Test {
 protected:
  void SetUp() override { write_idx_set(dir_.path(), {31, 9, 3}, /*gzip=*/false); }
  fs::path file(const std::string& name) const { return dir_ / name; }
  config::DataConfig config() const { return data_config(config::DatasetName::kFashionMnist, dir_.path()); }

  TempDir dir_{"gputrain-idx"};
};

TEST_F(IdxRaw, WrongMagicNumberIsADataError) {
  patch(file("train-images-idx3-ubyte"), 0, std::string("\0\0\x08\x01", 4));
  expect_data_error(config(), Split::kTrain,
                    {file("train-images-idx3-ubyte").string(), "magic number 0x00000801, expected 0x00000803"});
}

TEST_F(IdxRaw, WrongDimensionsAreADataError) {
  patch(file("t10k-images-idx3-ubyte"), 8, std::string("\0\0\0\x1b", 4));  // 27 rows
  expect_data_error(config(), Split::kTest, {file("t10k-images-idx3-ubyte").string(), "27x28 pixels, expected 28x28"});
}

TEST_F(IdxRaw, ExtraBytesAreADataError) {
  write_bytes(file("train-labels-idx1-ubyte"), read_bytes(file("train-labels-idx1-ubyte")) + "\x01");
  expect_data_error(config(), Split::kTrain, {file("train-labels-idx1-ubyte").string(), "too long"});
}

TEST_F(IdxRaw, CountMismatchIsADataError) {
  TempDir other("gputrain-idx");
  write_idx_set(other.path(), {30, 9, 3}, /*gzip=*/false);
  fs::copy_file(other / "train-labels-idx1-ubyte", file("train-labels-idx1-ubyte"),
                fs::copy_options::overwrite_existing);
  expect_data_error(config(), Split::kTrain,
                    {file("train-labels-idx1-ubyte").string(), "holds 30 labels",
                     file("train-images-idx3-ubyte").string() + " holds 31 images"});
}

TEST_F(IdxRaw, LabelOutOfRangeNamesFileAndSample) {
  patch(file("t10k-labels-idx1-ubyte"), 8 + 4, "\x0c");
  expect_data_error(config(), Split::kTest,
                    {file("t10k-labels-idx1-ubyte").string(), "label 12 of sample 4 is outside 0..9"});
}

// Found by fuzz_idx: the reader allocated what a header promised (here 105 GB
// for 134,217,730 images) before comparing it with the size of the file.
TEST_F(IdxRaw, HeaderPromisingMoreThanTheFileHoldsFailsBeforeAllocating) {
  patch(file("t10k-images-idx3-ubyte"), 4, std::string("\x08\0\0\x02", 4));
  expect_data_error(config(), Split::kTest,
                    {file("t10k-images-idx3-ubyte").string(), "bytes of 134217730 images: the file is truncated"});
}

TEST_F(IdxRaw, RawFileWinsOverGzip) {
  // A different (gzip) set beside the raw one: the raw files are what is read.
  TempDir other("gputrain-idx");
  write_idx_set(other.path(), {31, 9, 99}, /*gzip=*/true);
  for (const auto& entry : fs::directory_iterator(other.path()))
    fs::copy_file(entry.path(), dir_ / entry.path().filename());
  expect_same_images(*make_dataset(config(), Split::kTrain, 0), make_image_set(31, 1, 28, 3, Split::kTrain));
}

TEST(IdxGzip, TruncatedTrailerIsADataError) {
  TempDir dir("gputrain-idx");
  write_idx_set(dir.path(), {31, 9, 3}, /*gzip=*/true);
  const fs::path labels = dir / "train-labels-idx1-ubyte.gz";
  fs::resize_file(labels, fs::file_size(labels) - 4);  // cut the length field off the trailer
  expect_data_error(data_config(config::DatasetName::kFashionMnist, dir.path()), Split::kTrain,
                    {labels.string(), "truncated gzip stream"});
}

TEST(IdxGzip, CorruptStreamIsADataError) {
  TempDir dir("gputrain-idx");
  write_idx_set(dir.path(), {31, 9, 3}, /*gzip=*/true);
  const fs::path images = dir / "train-images-idx3-ubyte.gz";
  const std::string bytes = read_bytes(images);
  patch(images, bytes.size() - 6, "\xff\xff");  // inside the CRC-32 of the trailer
  expect_data_error(data_config(config::DatasetName::kFashionMnist, dir.path()), Split::kTrain,
                    {images.string(), "corrupt gzip stream"});
}

// Nearest class mean of `train`, scored on `test`: a floor for what a small model learns.
double nearest_mean_accuracy(const torch::Tensor& train_x, const torch::Tensor& train_y, const torch::Tensor& test_x,
                             const torch::Tensor& test_y, int64_t classes) {
  std::vector<torch::Tensor> means;
  for (int64_t c = 0; c < classes; ++c) means.push_back(train_x.index({train_y == c}).mean(0));
  const torch::Tensor predicted = torch::cdist(test_x, torch::stack(means)).argmin(1);
  return predicted.eq(test_y).to(torch::kFloat64).mean().item<double>();
}

TEST(GeneratedImages, AreBalancedAndLearnable) {
  const ImageSet train = make_image_set(200, 3, 32, 1, Split::kTrain);
  const ImageSet test = make_image_set(100, 3, 32, 1, Split::kTest);
  EXPECT_TRUE(torch::equal(torch::bincount(labels_of(train), {}, 10), torch::full({10}, 20, torch::kInt64)));
  EXPECT_FALSE(torch::equal(pixels_of(train).slice(0, 0, 100), pixels_of(test)));
  const auto flat = [](const ImageSet& set) { return pixels_of(set).reshape({set.size(), -1}).to(torch::kFloat32); };
  EXPECT_GT(nearest_mean_accuracy(flat(train), labels_of(train), flat(test), labels_of(test), 10), 0.9);
}

TEST(RandomDataset, IsTheTutorialsUnlabeledNormalData) {
  const auto config = data_config(config::DatasetName::kRandom);
  const auto train = make_dataset(config, Split::kTrain, 7);
  EXPECT_EQ(train->info().samples, 100);
  EXPECT_EQ(train->info().input_shape, std::vector<int64_t>{5});
  EXPECT_EQ(train->info().target_kind, TargetKind::kNone);
  EXPECT_FALSE(train->targets().defined());
  EXPECT_EQ(train->inputs().sizes(), (std::vector<int64_t>{100, 5}));
  EXPECT_EQ(train->inputs().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(train->inputs(), make_dataset(config, Split::kTrain, 7)->inputs()));
  EXPECT_FALSE(torch::equal(train->inputs(), make_dataset(config, Split::kTest, 7)->inputs()));
  EXPECT_FALSE(torch::equal(train->inputs(), make_dataset(config, Split::kTrain, 8)->inputs()));
  EXPECT_NEAR(train->inputs().mean().item<double>(), 0.0, 0.2);
  EXPECT_NEAR(train->inputs().std().item<double>(), 1.0, 0.2);
}

TEST(SyntheticDataset, ClassesFollowOneTeacherAcrossSplits) {
  const auto config = data_config(config::DatasetName::kSynthetic);  // 1000 x 20 over 2 classes, 200 test samples
  const auto train = make_dataset(config, Split::kTrain, 4);
  const auto test = make_dataset(config, Split::kTest, 4);
  EXPECT_EQ(train->info().samples, 1000);
  EXPECT_EQ(test->info().samples, 200);
  EXPECT_EQ(train->info().input_shape, std::vector<int64_t>{20});
  EXPECT_EQ(train->info().classes, 2);
  EXPECT_EQ(train->targets().scalar_type(), torch::kInt64);
  EXPECT_TRUE(torch::equal(train->targets(), make_dataset(config, Split::kTrain, 4)->targets()));
  // Learnable: one teacher labels both splits, so what holds on one predicts the other.
  EXPECT_GT(nearest_mean_accuracy(train->inputs(), train->targets(), test->inputs(), test->targets(), 2), 0.8);
  const double share = train->targets().to(torch::kFloat64).mean().item<double>();
  EXPECT_GT(share, 0.2);
  EXPECT_LT(share, 0.8);
}

TEST(SyntheticDataset, RegressionTargetsComeFromALinearMap) {
  auto config = data_config(config::DatasetName::kSynthetic);
  config.features = 10;
  config.targets = 1;
  const auto train = make_dataset(config, Split::kTrain, 0);
  const auto test = make_dataset(config, Split::kTest, 0);
  EXPECT_EQ(train->info().target_kind, TargetKind::kValues);
  EXPECT_EQ(train->info().targets, 1);
  EXPECT_EQ(train->targets().sizes(), (std::vector<int64_t>{1000, 1}));
  EXPECT_EQ(train->targets().scalar_type(), torch::kFloat32);
  // Least squares on the training split predicts the test split almost exactly.
  const torch::Tensor x = train->inputs();
  const torch::Tensor w = torch::linalg_solve(x.t().matmul(x), x.t().matmul(train->targets()));
  const double mse = (test->inputs().matmul(w) - test->targets()).pow(2).mean().item<double>();
  EXPECT_LT(mse, 1e-3);
  EXPECT_GT(train->targets().var().item<double>(), 0.3);
}

TEST(FashionMnist, ReadsTheInstalledSetWhole) {
  const std::string root = config::default_data_root(config::DatasetName::kFashionMnist);
  if (!fs::is_directory(root)) GTEST_SKIP() << root << " is absent (Debian package dataset-fashion-mnist)";
  const auto config = data_config(config::DatasetName::kFashionMnist, root);
  for (const auto& [split, samples] : {std::pair{Split::kTrain, 60000}, std::pair{Split::kTest, 10000}}) {
    const auto dataset = make_dataset(config, split, 0);
    EXPECT_EQ(dataset->info().samples, samples);
    EXPECT_EQ(dataset->inputs().sizes(), (std::vector<int64_t>{samples, 1, 28, 28}));
    const torch::Tensor per_class = torch::bincount(dataset->targets(), {}, 10);
    EXPECT_TRUE(torch::equal(per_class, torch::full({10}, samples / 10, torch::kInt64))) << per_class;
  }
}

}  // namespace
}  // namespace gputrain::data
