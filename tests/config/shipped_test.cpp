// The shipped configs' catalogue: descriptions, lookup by name, nearest names.
#include "gputrain/config/shipped.h"

#include <gtest/gtest.h>

#include "gputrain/common/error.h"
#include "support/paths.h"

namespace gputrain::config {
namespace {

const std::filesystem::path kConfigs = std::filesystem::path(testing::kSourceDir) / "configs";

TEST(ShippedConfigs, DescriptionIsTheFirstLineComment) {
  EXPECT_EQ(config_description("# An MLP on Fashion-MNIST  \n#\n# more\nname: x\n"), "An MLP on Fashion-MNIST");
  EXPECT_EQ(config_description("name: x\n# not first\n"), "");
  EXPECT_EQ(config_description(""), "");
}

TEST(ShippedConfigs, EveryOneHasAOneLineDescription) {
  const std::vector<ShippedConfig> configs = shipped_configs(kConfigs);
  ASSERT_GE(configs.size(), 10u);
  for (const ShippedConfig& c : configs) {
    EXPECT_FALSE(c.description.empty()) << c.path << ": its first line must be a comment saying what it trains";
    EXPECT_LE(c.description.size(), 100u) << c.path << ": the description is one line of `gputrain configs`";
  }
  EXPECT_TRUE(std::is_sorted(configs.begin(), configs.end(),
                             [](const ShippedConfig& a, const ShippedConfig& b) { return a.name < b.name; }));
}

TEST(ShippedConfigs, FoundByNameWithOrWithoutTheSuffix) {
  EXPECT_EQ(find_shipped_config(kConfigs, "fashion_mnist").path, kConfigs / "fashion_mnist.yaml");
  EXPECT_EQ(find_shipped_config(kConfigs, "seed_mlp.yaml").name, "seed_mlp");
}

TEST(ShippedConfigs, AnUnknownNameNamesTheNearest) {
  try {
    find_shipped_config(kConfigs, "fashoin_mnist");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    EXPECT_NE(std::string(e.what()).find("no shipped config is named 'fashoin_mnist'; the nearest: fashion_mnist, "),
              std::string::npos)
        << e.what();
  }
  try {
    find_shipped_config(kConfigs, "cifar");
    FAIL() << "no error";
  } catch (const UserError& e) {  // a name's start ranks first
    EXPECT_NE(std::string(e.what()).find("the nearest: cifar10, cifar10_fast or cifar10_layers"), std::string::npos)
        << e.what();
  }
}

TEST(ShippedConfigs, AMissingFolderSaysTheInstallationLacksIt) {
  EXPECT_THROW(shipped_configs("/nonexistent/configs"), UserError);
}

}  // namespace
}  // namespace gputrain::config
