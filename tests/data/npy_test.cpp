// dataset: npy — the user's own arrays, from .npy files or one .npz, and each
// way such files can be wrong.
#include <gtest/gtest.h>
#include <minizip/zip.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/data/dataset.h"
#include "gputrain/data/export.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::TempDir;

config::DataConfig npy_config(const fs::path& root) {
  config::DataConfig config;
  config.dataset = config::DatasetName::kNpy;
  config.root = root.string();
  return config;
}

std::string what_loading_throws(const config::DataConfig& config, Split split = Split::kTrain) {
  try {
    make_dataset(config, split, 0);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no DataError";
}

// A .npy file with header fields as given, for the malformed cases.
void write_raw_npy(const fs::path& file, const std::string& descr, const std::string& shape, std::size_t data_bytes,
                   bool fortran = false) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(file, std::ios::binary);
  out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size() & 0xff)
      << static_cast<char>(header.size() >> 8) << header << std::string(data_bytes, '\0');
}

// The four arrays of a small classification set: float features, int64 labels 0..2.
struct Arrays {
  torch::Tensor train_inputs = torch::arange(24, torch::kFloat32).reshape({6, 4});
  torch::Tensor train_targets = torch::tensor({0, 1, 2, 0, 1, 2}, torch::kInt64);
  torch::Tensor test_inputs = torch::arange(8, torch::kFloat32).reshape({2, 4});
  torch::Tensor test_targets = torch::tensor({2, 0}, torch::kInt64);

  void write(const fs::path& dir) const {
    write_npy(dir / "train_inputs.npy", train_inputs);
    write_npy(dir / "train_targets.npy", train_targets);
    write_npy(dir / "test_inputs.npy", test_inputs);
    write_npy(dir / "test_targets.npy", test_targets);
  }
};

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// numpy.savez's layout: one zip member NAME.npy per array (deflated here, as savez_compressed does).
// An .npz of `members` (name, the .npy file to store), in order; a name may come twice.
void write_npz_members(const fs::path& npz, const std::vector<std::pair<std::string, fs::path>>& members) {
  zipFile zip = zipOpen64(npz.c_str(), APPEND_STATUS_CREATE);
  ASSERT_NE(zip, nullptr);
  for (const auto& [name, file] : members) {
    const std::string bytes = file_bytes(file);
    zip_fileinfo info{};
    ASSERT_EQ(zipOpenNewFileInZip64(zip, (name + ".npy").c_str(), &info, nullptr, 0, nullptr, 0, nullptr, Z_DEFLATED,
                                    Z_DEFAULT_COMPRESSION, 1),
              ZIP_OK);
    ASSERT_EQ(zipWriteInFileInZip(zip, bytes.data(), static_cast<unsigned>(bytes.size())), ZIP_OK);
    ASSERT_EQ(zipCloseFileInZip(zip), ZIP_OK);
  }
  ASSERT_EQ(zipClose(zip, nullptr), ZIP_OK);
}

void write_npz(const fs::path& npz, const fs::path& dir, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, fs::path>> members;
  for (const std::string& name : names) members.emplace_back(name, dir / (name + ".npy"));
  write_npz_members(npz, members);
}

TEST(Npy, ReadsTheArraysThatExportWrites) {
  TempDir dir("npy");
  const Arrays arrays;
  arrays.write(dir.path());
  const auto train = make_dataset(npy_config(dir.path()), Split::kTrain, 0);
  const auto test = make_dataset(npy_config(dir.path()), Split::kTest, 0);
  EXPECT_TRUE(torch::equal(train->inputs(), arrays.train_inputs));
  EXPECT_TRUE(torch::equal(train->targets(), arrays.train_targets));
  EXPECT_TRUE(torch::equal(test->inputs(), arrays.test_inputs));
  EXPECT_EQ(train->info().name, "npy");
  EXPECT_EQ(train->info().input_shape, std::vector<int64_t>{4});
  EXPECT_EQ(train->info().target_kind, TargetKind::kClasses);
  EXPECT_EQ(train->info().classes, 3);
  EXPECT_FALSE(train->info().images);
  EXPECT_NE(train->describe_sample(5).find("train_inputs.npy, record 5"), std::string::npos)
      << train->describe_sample(5);
}

TEST(Npy, ClassesCountBothSplitsSoTheyAgree) {
  TempDir dir("npy");
  Arrays arrays;
  arrays.test_targets = torch::tensor({4, 0}, torch::kInt64);  // class 4 only in the test split
  arrays.write(dir.path());
  EXPECT_EQ(make_dataset(npy_config(dir.path()), Split::kTrain, 0)->info().classes, 5);
  EXPECT_EQ(make_dataset(npy_config(dir.path()), Split::kTest, 0)->info().classes, 5);
}

TEST(Npy, Uint8SamplesOfOneOrThreeDimensionsAreImages) {
  TempDir dir("npy");
  Arrays arrays;
  arrays.train_inputs = torch::randint(0, 256, {6, 5, 7}, torch::kUInt8);  // [N, H, W]: one channel
  arrays.test_inputs = torch::randint(0, 256, {2, 5, 7}, torch::kUInt8);
  arrays.train_targets = arrays.train_targets.to(torch::kInt32);  // any integer type
  arrays.write(dir.path());
  const auto train = make_dataset(npy_config(dir.path()), Split::kTrain, 0);
  EXPECT_TRUE(train->info().images);
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_TRUE(torch::equal(train->inputs().squeeze(1), arrays.train_inputs));
  EXPECT_EQ(train->targets().scalar_type(), torch::kInt64);
}

TEST(Npy, FloatTargetsAreRegressionValues) {
  TempDir dir("npy");
  Arrays arrays;
  arrays.train_inputs = arrays.train_inputs.to(torch::kFloat64);     // converted to float32
  arrays.train_targets = torch::linspace(0, 1, 6, torch::kFloat32);  // [N]: one value a sample
  arrays.test_targets = torch::ones({2, 1}, torch::kFloat32);        // [N, 1] is the same
  arrays.write(dir.path());
  const auto train = make_dataset(npy_config(dir.path()), Split::kTrain, 0);
  EXPECT_EQ(train->info().target_kind, TargetKind::kValues);
  EXPECT_EQ(train->info().targets, 1);
  EXPECT_EQ(train->inputs().scalar_type(), torch::kFloat32);
  EXPECT_EQ(make_dataset(npy_config(dir.path()), Split::kTest, 0)->info().targets, 1);
  arrays.train_targets = torch::rand({6, 3});
  arrays.test_targets = torch::ones({2, 3}, torch::kFloat32);
  arrays.write(dir.path());
  EXPECT_EQ(make_dataset(npy_config(dir.path()), Split::kTest, 0)->info().targets, 3);
}

// Issue 37 #3, #4: a split without samples, splits that disagree (checked from
// the other split's header, whichever split loads first) and a label that is
// no class index are DataErrors naming the files.
TEST(Npy, EmptySplitsSplitsThatDisagreeAndHugeLabelsAreRefused) {
  TempDir dir("npy");
  const config::DataConfig config = npy_config(dir.path());
  Arrays arrays;
  arrays.test_inputs = torch::zeros({0, 4});
  arrays.test_targets = torch::zeros({0}, torch::kInt64);
  arrays.write(dir.path());
  EXPECT_EQ(make_dataset(config, Split::kTrain, 0)->info().samples, 6);
  EXPECT_NE(what_loading_throws(config, Split::kTest).find("test_inputs.npy: holds no samples (shape (0, 4))"),
            std::string::npos)
      << what_loading_throws(config, Split::kTest);

  arrays = Arrays();
  arrays.test_inputs = torch::zeros({2, 5});
  arrays.write(dir.path());
  for (const Split split : {Split::kTrain, Split::kTest}) {
    EXPECT_NE(what_loading_throws(config, split)
                  .find("train_inputs.npy holds features of [4] but " + (dir / "test_inputs.npy").string() +
                        " holds features of [5]"),
              std::string::npos)
        << what_loading_throws(config, split);
  }
  arrays = Arrays();
  arrays.test_targets = torch::ones({2}, torch::kFloat32);
  arrays.write(dir.path());
  EXPECT_NE(what_loading_throws(config).find("holds integer class labels but " + (dir / "test_targets.npy").string() +
                                             " holds float regression targets, 1 a sample"),
            std::string::npos)
      << what_loading_throws(config);

  arrays = Arrays();
  arrays.train_targets = torch::tensor(std::vector<int64_t>{0, 1, 2, 0, 1000000000, 1});
  arrays.write(dir.path());
  EXPECT_NE(what_loading_throws(config).find("sample 4 has label 1000000000; class labels run from 0 to classes - 1, "
                                             "and at most 100000 classes"),
            std::string::npos)
      << what_loading_throws(config);
}

// Once an "internal error at layers.cpp:35": the model cannot take samples of no values.
TEST(Npy, SamplesWithNoFeaturesAreRefused) {
  TempDir dir("npy");
  Arrays arrays;
  arrays.train_inputs = torch::zeros({6, 0});
  arrays.write(dir.path());
  EXPECT_NE(what_loading_throws(npy_config(dir.path()))
                .find("train_inputs.npy: shape (6, 0) leaves each sample no values (a dimension of 0)"),
            std::string::npos)
      << what_loading_throws(npy_config(dir.path()));
}

// NaN or inf in the inputs made the loss NaN and train.on_nan blame the learning rate.
TEST(Npy, NonFiniteInputsOrTargetsAreRefusedNamingTheSample) {
  TempDir dir("npy");
  Arrays arrays;
  arrays.train_inputs[3][1] = std::nanf("");
  arrays.train_inputs[5][0] = INFINITY;
  arrays.write(dir.path());
  EXPECT_NE(what_loading_throws(npy_config(dir.path()))
                .find("train_inputs.npy: sample 3 holds NaN or inf (2 of the 6 samples do)"),
            std::string::npos)
      << what_loading_throws(npy_config(dir.path()));

  Arrays regression;
  regression.train_targets = torch::ones({6}, torch::kFloat32);
  regression.test_targets = torch::ones({2}, torch::kFloat32);
  regression.test_targets[1] = std::nanf("");
  regression.write(dir.path());
  const std::string test_error = what_loading_throws(npy_config(dir.path()), Split::kTest);
  EXPECT_NE(test_error.find("test_targets.npy: sample 1 holds NaN or inf (1 of the 2 samples do)"), std::string::npos)
      << test_error;
}

// Issue 37 (weak): of two members with one name the first was read, where
// numpy reads the last; a bzip2 member was called truncated.
TEST(Npy, NpzMembersAreReadAsNumpyReadsThemOrTheMethodIsNamed) {
  TempDir dir("npy");
  const Arrays arrays;
  arrays.write(dir.path());
  write_npy(dir / "stale.npy", arrays.train_inputs * 0);
  const fs::path twice = dir / "twice.npz";
  write_npz_members(twice, {{"train_inputs", dir / "stale.npy"},
                            {"train_targets", dir / "train_targets.npy"},
                            {"test_inputs", dir / "test_inputs.npy"},
                            {"test_targets", dir / "test_targets.npy"},
                            {"train_inputs", dir / "train_inputs.npy"}});
  EXPECT_TRUE(torch::equal(make_dataset(npy_config(twice), Split::kTrain, 0)->inputs(), arrays.train_inputs));

  // The same archive with every member's method (local header and central directory) said to be bzip2.
  const fs::path bzip2 = dir / "bzip2.npz";
  write_npz(bzip2, dir.path(), {"train_inputs", "train_targets", "test_inputs", "test_targets"});
  std::string bytes = file_bytes(bzip2);
  const std::vector<std::pair<std::string, std::size_t>> method_fields{{std::string("PK\x03\x04", 4), 8},
                                                                       {std::string("PK\x01\x02", 4), 10}};
  for (const auto& [signature, method_at] : method_fields) {
    for (std::size_t at = bytes.find(signature); at != std::string::npos; at = bytes.find(signature, at + 1)) {
      bytes[at + method_at] = 12;
      bytes[at + method_at + 1] = 0;
    }
  }
  gputrain::testing::write_text(bzip2, bytes);
  EXPECT_NE(what_loading_throws(npy_config(bzip2))
                .find("bzip2.npz:train_inputs.npy: the member is compressed with bzip2 (zip method 12), which "
                      "gputrain cannot read"),
            std::string::npos)
      << what_loading_throws(npy_config(bzip2));
}

TEST(Npy, OneNpzHoldsTheFourArrays) {
  TempDir dir("npy");
  const Arrays arrays;
  arrays.write(dir.path());
  const fs::path npz = dir / "set.npz";
  write_npz(npz, dir.path(), {"train_inputs", "train_targets", "test_inputs", "test_targets"});
  const auto train = make_dataset(npy_config(npz), Split::kTrain, 0);
  EXPECT_TRUE(torch::equal(train->inputs(), arrays.train_inputs));
  EXPECT_TRUE(torch::equal(train->targets(), arrays.train_targets));
  EXPECT_NE(train->describe_sample(0).find("set.npz:train_inputs.npy"), std::string::npos);

  const fs::path partial = dir / "partial.npz";
  write_npz(partial, dir.path(), {"train_inputs", "train_targets"});
  EXPECT_NE(what_loading_throws(npy_config(partial), Split::kTest).find("partial.npz has no array 'test_inputs'"),
            std::string::npos);
  std::ofstream(dir / "not-a-zip.npz") << "plain text";
  EXPECT_NE(what_loading_throws(npy_config(dir / "not-a-zip.npz")).find("neither a directory nor an .npz"),
            std::string::npos);
}

TEST(Npy, EachBadFileIsADataErrorNamingItAndTheFix) {
  TempDir dir("npy");
  const config::DataConfig config = npy_config(dir.path());
  EXPECT_NE(what_loading_throws(config).find("train_inputs.npy is missing"), std::string::npos);
  EXPECT_NE(what_loading_throws(npy_config("")).find("data.root is empty"), std::string::npos);

  Arrays arrays;
  arrays.write(dir.path());
  fs::remove(dir / "test_targets.npy");
  EXPECT_NE(what_loading_throws(config, Split::kTest).find("test_targets.npy is missing"), std::string::npos);

  write_npy(dir / "train_targets.npy", torch::tensor({0, 1, 2}, torch::kInt64));
  EXPECT_NE(what_loading_throws(config).find("holds 6 samples but"), std::string::npos) << what_loading_throws(config);

  write_npy(dir / "train_targets.npy", torch::tensor({0, 1, -1, 0, 1, 2}, torch::kInt64));
  EXPECT_NE(what_loading_throws(config).find("sample 2 has label -1"), std::string::npos)
      << what_loading_throws(config);
  arrays.write(dir.path());

  write_raw_npy(dir / "train_inputs.npy", "<c8", "(6, 4)", 6 * 4 * 8);
  EXPECT_NE(what_loading_throws(config).find("dtype '<c8' is not supported"), std::string::npos);
  write_raw_npy(dir / "train_inputs.npy", ">f4", "(6, 4)", 6 * 4 * 4);
  EXPECT_NE(what_loading_throws(config).find("dtype '>f4' is not supported"), std::string::npos);
  write_raw_npy(dir / "train_inputs.npy", "<f4", "(6, 4)", 6 * 4 * 4, /*fortran=*/true);
  EXPECT_NE(what_loading_throws(config).find("Fortran"), std::string::npos);
  write_raw_npy(dir / "train_inputs.npy", "<f4", "(6, 4)", 50);
  EXPECT_NE(what_loading_throws(config).find("needs 96 bytes of data, the file holds 50"), std::string::npos)
      << what_loading_throws(config);
  // Shapes a damaged header states: a negative size, and sizes whose byte count wraps around to the file's.
  write_raw_npy(dir / "train_inputs.npy", "<f4", "(-6, 4)", 6 * 4 * 4);
  EXPECT_NE(what_loading_throws(config).find("shape (-6, 4) is not a tuple of sizes"), std::string::npos)
      << what_loading_throws(config);
  write_raw_npy(dir / "train_inputs.npy", "<f4", "(4611686018427387904, 4)", 0);
  EXPECT_NE(what_loading_throws(config).find("needs more bytes than a file can hold"), std::string::npos)
      << what_loading_throws(config);
  std::ofstream(dir / "train_inputs.npy") << "a,b\n1,2\n";
  const std::string not_npy = what_loading_throws(config);
  EXPECT_NE(not_npy.find("train_inputs.npy: not a .npy file"), std::string::npos) << not_npy;
}

}  // namespace
}  // namespace gputrain::data
