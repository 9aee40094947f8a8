#include <gtest/gtest.h>

#include <filesystem>

#include "gputrain/config/load.h"
#include "support/paths.h"

namespace gputrain::config {
namespace {

TEST(ConfigDump, RoundTripIsAFixedPoint) {
  const auto first = load_config_text(
      "name: rt\ndevice: cuda:1\ngpus: [1]\nmodel: {name: mlp, hidden: [256, 128], in_features: 784}\n"
      "optim: {name: adamw, lr: 3.0e-4, betas: [0.9, 0.95], eps: 1e-8}\n"
      "data: {dataset: fashion_mnist, normalize: {mean: [0.2860], std: [0.3530]}}\n",
      "rt.yaml");
  const std::string dumped = dump_config(first.config);
  const auto second = load_config_text(dumped, "dumped.yaml");
  EXPECT_EQ(dump_config(second.config), dumped);
  EXPECT_EQ(second.config.model.in_features, 784);
  EXPECT_FALSE(second.config.model.out_features.has_value());
  EXPECT_DOUBLE_EQ(second.config.optim.lr, 3.0e-4);
  EXPECT_DOUBLE_EQ(second.config.data.normalize.std[0], 0.3530);
  EXPECT_EQ(second.config.gpus.indices, (std::vector<int64_t>{1}));
  EXPECT_EQ(second.config.device.text(), "cuda:1");
}

TEST(ConfigDump, EveryShippedConfigRoundTrips) {
  const std::filesystem::path dir = std::filesystem::path(testing::kSourceDir) / "configs";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    const auto loaded = load_config(entry.path().string());
    const std::string dumped = dump_config(loaded.config);
    EXPECT_EQ(dump_config(load_config_text(dumped, "dumped").config), dumped) << entry.path();
  }
  EXPECT_GT(seen, 0);
}

}  // namespace
}  // namespace gputrain::config
