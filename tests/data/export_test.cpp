// .npy export: the bytes NumPy expects, and the very samples the trainer uses.
#include "gputrain/data/export.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

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
  EXPECT_EQ(inputs.payload, std::string(static_cast<const char*>(test->inputs().const_data_ptr()), 10 * 5 * 4));
  EXPECT_EQ(targets.payload, std::string(static_cast<const char*>(test->targets().const_data_ptr()), 10 * 8));
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "train_inputs.npy"));
}

// The exported arrays train as `dataset: npy` to the very run the generated set gives.
TEST(DatasetsExport, TheExportedSetTrainsAsNpyLikeTheGeneratedOne) {
  TempDir dir;
  const std::string config = std::string(GPUTRAIN_SOURCE_DIR) + "/configs/seed_mlp.yaml";
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
