// .npy export: the bytes NumPy expects, and the very samples the trainer uses.
#include "gputrain/data/export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <tuple>

#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::data {
namespace {

using gputrain::testing::TempDir;

std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The header and payload of a version 1.0 .npy file.
struct Npy {
  std::string header;
  std::string payload;
};

Npy parse(const std::string& bytes) {
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t length =
      static_cast<uint8_t>(bytes[8]) | (static_cast<std::size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  EXPECT_EQ((10 + length) % 64, 0u);
  return {bytes.substr(10, length), bytes.substr(10 + length)};
}

TEST(WriteNpy, HeaderAndPayloadAsNumPyReadsThem) {
  TempDir dir;
  const torch::Tensor values = torch::arange(6, torch::kFloat32).view({3, 2}) / 4;
  write_npy(dir / "v.npy", values);
  const Npy v = parse(read_bytes(dir / "v.npy"));
  EXPECT_EQ(v.header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", 0), 0u) << v.header;
  EXPECT_EQ(v.header.back(), '\n');
  EXPECT_EQ(v.payload, std::string(static_cast<const char*>(values.const_data_ptr()), values.nbytes()));

  write_npy(dir / "l.npy", torch::tensor({int64_t{7}, int64_t{1}}));
  const Npy l = parse(read_bytes(dir / "l.npy"));
  EXPECT_NE(l.header.find("'descr': '<i8'"), std::string::npos) << l.header;
  EXPECT_NE(l.header.find("'shape': (2,)"), std::string::npos) << l.header;
  EXPECT_EQ(l.payload.size(), 16u);
}

TEST(DatasetsExport, WritesTheSyntheticSetTheTrainerGenerates) {
  TempDir dir;
  const auto yaml = gputrain::testing::write_text(
      dir / "s.yaml", "seed: 4\ndata: {dataset: synthetic, samples: 30, test_samples: 10, features: 5}\n");
  const auto r = gputrain::testing::run_gputrain(
      {"datasets", "export", "--config", yaml.string(), "--out", (dir / "out").string(), "--set", "data.classes=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  config::DataConfig config;
  config.dataset = gputrain::config::DatasetName::kSynthetic;
  config.samples = 30;
  config.test_samples = 10;
  config.features = 5;
  config.classes = 3;
  const auto test = make_dataset(config, Split::kTest, 4);
  const Npy inputs = parse(read_bytes(dir / "out" / "test_inputs.npy"));
  const Npy targets = parse(read_bytes(dir / "out" / "test_targets.npy"));
  EXPECT_NE(inputs.header.find("'shape': (10, 5)"), std::string::npos) << inputs.header;
  // The bytes: the child drew the same seed's numbers with the same kernels (this test's environment).
  EXPECT_EQ(inputs.payload, std::string(static_cast<const char*>(test->inputs().const_data_ptr()), 10 * 5 * 4));
  EXPECT_EQ(targets.payload, std::string(static_cast<const char*>(test->targets().const_data_ptr()), 10 * 8));
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "train_inputs.npy"));
}

// Issue 37 #13: every format refuses a set already in --out without --force,
// checked before anything is written, and an empty --out is refused.
TEST(DatasetsExport, AnExistingSetIsReplacedOnlyWithForceAndAnEmptyOutIsRefused) {
  TempDir dir;
  const auto yaml = gputrain::testing::write_text(
      dir / "s.yaml", "data: {dataset: synthetic, samples: 12, test_samples: 4, features: 3}\n");
  const auto run = [&](const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> args{"datasets", "export", "--out", out};
    if (std::find(more.begin(), more.end(), "--config") == more.end())
      more.insert(more.end(), {"--config", yaml.string()});
    args.insert(args.end(), more.begin(), more.end());
    return gputrain::testing::run_gputrain(args, {}, dir.path().string());
  };
  const std::string npy = (dir / "npy").string();
  ASSERT_EQ(run(npy, {}).exit_code, 0);
  const std::string first = read_bytes(dir / "npy" / "test_inputs.npy");
  std::filesystem::remove(dir / "npy" / "train_inputs.npy");  // part of the set is left: still refused
  const auto refused = run(npy, {"--set", "seed=3"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find(npy + ": holds a data set already (train_targets.npy); add --force"), std::string::npos)
      << refused.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "npy" / "train_inputs.npy")) << "written before the refusal";
  EXPECT_EQ(read_bytes(dir / "npy" / "test_inputs.npy"), first);
  ASSERT_EQ(run(npy, {"--set", "seed=3", "--force"}).exit_code, 0);
  EXPECT_NE(read_bytes(dir / "npy" / "test_inputs.npy"), first);

  const std::string idx = (dir / "idx").string(), png = (dir / "png").string();
  ASSERT_EQ(
      gputrain::testing::run_gputrain({"datasets", "make-idx", "--out", idx, "--train", "10", "--test", "5"}).exit_code,
      0);
  const auto images_yaml = gputrain::testing::write_text(dir / "i.yaml", "data: {dataset: mnist, root: " + idx + "}\n");
  const std::vector<std::string> images{"--format", "png", "--config", images_yaml.string()};
  ASSERT_EQ(run(png, images).exit_code, 0);
  std::filesystem::remove_all(dir / "png" / "train");
  EXPECT_EQ(run(png, images).exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "png" / "train")) << "written before the refusal";
  std::vector<std::string> forced = images;
  forced.push_back("--force");
  ASSERT_EQ(run(png, forced).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "png" / "train"));

  const auto empty = run("", {});
  EXPECT_EQ(empty.exit_code, 2) << empty.err;
  EXPECT_NE(empty.err.find("--out is empty"), std::string::npos) << empty.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "train_inputs.npy"));
}

// Issue 62 #12: an export never writes a second data set beside another kind
// in --out (an npy set, an image folder, IDX files), --force or not.
TEST(DatasetsExport, NeverWritesASecondSetBesideAnotherKind) {
  TempDir dir;
  const std::string idx = (dir / "idx").string();
  ASSERT_EQ(
      gputrain::testing::run_gputrain({"datasets", "make-idx", "--out", idx, "--train", "10", "--test", "5"}).exit_code,
      0);
  const auto yaml = gputrain::testing::write_text(dir / "i.yaml", "data: {dataset: mnist, root: " + idx + "}\n");
  const auto run = [&](const std::string& out, const std::string& format, bool force) {
    std::vector<std::string> args{"datasets", "export", "--config", yaml.string(), "--out", out, "--format", format};
    if (force) args.push_back("--force");
    return gputrain::testing::run_gputrain(args);
  };
  const std::string npy = (dir / "npy").string(), png = (dir / "png").string();
  ASSERT_EQ(run(npy, "npy", false).exit_code, 0);
  ASSERT_EQ(run(png, "png", false).exit_code, 0);
  for (const auto& [out, format, there] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {npy, "png", ".npy arrays: train_inputs.npy"},
           {png, "npy", "an image folder: train"},
           {idx, "png", "IDX files: train-images-idx3-ubyte"},
           {idx, "npy", "IDX files: train-images-idx3-ubyte"}}) {
    for (const bool force : {false, true}) {
      const auto r = run(out, format, force);
      EXPECT_EQ(r.exit_code, 2) << out << " " << format << r.err;
      EXPECT_NE(r.err.find(out + ": holds another data set (" + there + "); the export"), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "npy" / "train")) << "an image folder beside the arrays";
  EXPECT_FALSE(std::filesystem::exists(dir / "png" / "train_inputs.npy")) << "arrays beside the image folder";
  EXPECT_FALSE(std::filesystem::exists(dir / "idx" / "train"));
}

// The exported arrays train as `dataset: npy` to the very run the generated set gives: to the bit, as both
// runs are this binary in this test's environment (thread count, instruction set), the same kernels in the
// same order.
TEST(DatasetsExport, TheExportedSetTrainsAsNpyLikeTheGeneratedOne) {
  TempDir dir;
  const std::string config = std::string(testing::kSourceDir) + "/configs/seed_mlp.yaml";
  const auto exported =
      gputrain::testing::run_gputrain({"datasets", "export", "--config", config, "--out", (dir / "npy").string()});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto train = [&](std::vector<std::string> sets) {
    std::vector<std::string> args{"train", "--config", config, "--output", (dir / "runs").string()};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    const auto r = gputrain::testing::run_gputrain(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string summary = r.out.substr(r.out.rfind("{\"name\""));
    return summary.substr(summary.find("\"train_loss\""));  // the losses and accuracy, not the run's name or time
  };
  EXPECT_EQ(train({"name=npy", "data.dataset=npy", "data.root=" + (dir / "npy").string()}), train({"name=generated"}));
}

}  // namespace
}  // namespace gputrain::data
