// Configs that build on configs: --config given several times and `extends:`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/config/shipped.h"
#include "support/paths.h"
#include "support/temp_dir.h"

namespace gputrain::config {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_text;

// The ConfigError `load` throws; fails the test when it throws none.
template <typename Load>
ConfigError config_error(Load load) {
  try {
    load();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError";
  return ConfigError({}, "", "");
}

class StackedConfigs : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = write_text(dir_ / "bases" / "base.yaml",
                       "name: base\n"
                       "data:\n"
                       "  dataset: synthetic\n"
                       "  batch_size: 8\n"
                       "  augment: {hflip: true}\n"
                       "model:\n"
                       "  hidden: [16, 8]\n"
                       "train:\n"
                       "  epochs: 2\n")
                .string();
  }
  std::string file(const std::string& name, const std::string& text) { return write_text(dir_ / name, text).string(); }

  TempDir dir_;
  std::string base_;
};

TEST_F(StackedConfigs, LaterFilesGoOverEarlierMapsMergeListsAndValuesReplace) {
  const std::string over = file("over.yaml",
                                "name: over\n"
                                "data:\n"
                                "  batch_size: 16\n"
                                "model:\n"
                                "  hidden: [4]\n");
  const LoadedConfig loaded = load_config(std::vector<std::string>{base_, over});
  EXPECT_EQ(loaded.config.name, "over");
  EXPECT_EQ(loaded.config.data.batch_size, 16);
  EXPECT_EQ(loaded.config.data.dataset, DatasetName::kSynthetic);    // kept from the base: data merged key by key
  EXPECT_TRUE(loaded.config.data.augment.hflip);                     // two levels down
  EXPECT_EQ(loaded.config.model.hidden, (std::vector<int64_t>{4}));  // a list replaced, not appended to
  EXPECT_EQ(loaded.config.train.epochs, 2);
  // Each value names the file, line and column it came from.
  EXPECT_EQ(loaded.sources.exact("data.batch_size").str(), over + ":3:15");
  EXPECT_EQ(loaded.sources.exact("data.dataset").str(), base_ + ":3:12");
  EXPECT_EQ(loaded.sources.exact("data.augment.hflip").str(), base_ + ":5:20");
  EXPECT_EQ(loaded.sources.exact("train.epochs").str(), base_ + ":9:11");
  // --set still goes over them all.
  EXPECT_EQ(load_config(std::vector<std::string>{base_, over}, {"train.epochs=5"}).config.train.epochs, 5);
}

TEST_F(StackedConfigs, ExtendsIsRelativeToTheFileEarlierBasesUnderLaterOnes) {
  file("bases/second.yaml", "data: {batch_size: 32}\noptim: {lr: 0.5}\n");
  // bases/child.yaml names its bases relative to bases/, whatever the working folder.
  const std::string child = file("bases/child.yaml", "extends: [base.yaml, second.yaml]\noptim: {lr: 0.25}\n");
  const std::string top = file("top.yaml", "extends: bases/child.yaml\nname: top\n");
  const LoadedConfig loaded = load_config(top);
  EXPECT_EQ(loaded.config.name, "top");
  EXPECT_EQ(loaded.config.data.batch_size, 32);    // second.yaml over base.yaml
  EXPECT_DOUBLE_EQ(loaded.config.optim.lr, 0.25);  // the file itself over its bases
  EXPECT_EQ(loaded.config.model.hidden, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(loaded.sources.exact("optim.lr").str(), child + ":2:13");
  // explain names the file and line of every value, and the defaults as such.
  const std::string text = explain_config(loaded);
  EXPECT_NE(text.find(base_ + ":7:11"), std::string::npos) << text;  // model.hidden
  EXPECT_NE(text.find(top + ":2:7"), std::string::npos) << text;     // name
  EXPECT_NE(text.find("default"), std::string::npos) << text;
  EXPECT_EQ(text.find("extends"), std::string::npos) << text;  // not a key of the config
}

TEST_F(StackedConfigs, ACycleIsAnErrorAtTheExtendsThatClosesIt) {
  const std::string a = file("a.yaml", "extends: b.yaml\n");
  const std::string b = file("b.yaml", "name: b\nextends: [bases/base.yaml, a.yaml]\n");
  const ConfigError e = config_error([&] { load_config(a); });
  EXPECT_EQ(e.where().str(), b + ":2:28") << e.what();
  EXPECT_EQ(e.key(), "extends");
  EXPECT_NE(std::string(e.what()).find("cycle: " + a + " -> " + b + " -> " + a), std::string::npos) << e.what();
  EXPECT_EQ(e.code(), ExitCode::kUserInput);
  // A file reached twice, but not in a circle, is no cycle.
  file("left.yaml", "extends: bases/base.yaml\n");
  file("right.yaml", "extends: bases/base.yaml\n");
  EXPECT_EQ(load_config(file("both.yaml", "extends: [left.yaml, right.yaml]\n")).config.name, "base");
}

TEST_F(StackedConfigs, AMissingBaseIsAnErrorAtItsEntry) {
  const std::string child = file("child.yaml", "name: c\nextends:\n  - bases/base.yaml\n  - bases/nothere.yaml\n");
  const ConfigError e = config_error([&] { load_config(child); });
  EXPECT_EQ(e.where().str(), child + ":4:5") << e.what();
  EXPECT_NE(std::string(e.what()).find("no file 'bases/nothere.yaml'"), std::string::npos) << e.what();
  // extends names files: nothing else.
  const std::string odd = file("odd.yaml", "extends: {file: base.yaml}\n");
  EXPECT_EQ(config_error([&] { load_config(odd); }).where().str(), odd + ":1:10");
}

// A file that is a value or a list (fuzz.config found one) is refused as not a
// mapping, alone or stacked with another; looking for its `extends:` threw
// yaml-cpp's BadSubscript, an internal error (exit 1).
TEST_F(StackedConfigs, AFileThatIsAValueOrAListIsNotAMappingAloneOrStacked) {
  const std::string over = file("over.yaml", "name: over\n");
  for (const std::string text : {"hello\n", "- a\n- b\n"}) {
    const std::string odd = file("odd.yaml", text);
    for (const std::vector<std::string>& files :
         {std::vector<std::string>{odd}, std::vector<std::string>{odd, over}, std::vector<std::string>{over, odd}}) {
      try {
        load_config(files);
        ADD_FAILURE() << text << " was read";
      } catch (const ConfigError& e) {
        ADD_FAILURE() << e.what();
      } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("odd.yaml:1:1: the experiment file must be a mapping"), std::string::npos)
            << e.what();
      }
    }
  }
}

TEST_F(StackedConfigs, AKeyOfTheWrongKindInAnOverrideIsAnErrorWhereTheOverrideSaysIt) {
  const std::string scalar_over_map = file("s.yaml", "extends: bases/base.yaml\ndata: 64\n");
  const ConfigError e = config_error([&] { load_config(scalar_over_map); });
  EXPECT_EQ(e.where().str(), scalar_over_map + ":2:7") << e.what();
  EXPECT_EQ(e.key(), "data");
  EXPECT_NE(std::string(e.what()).find("a mapping in " + base_ + ":3:3"), std::string::npos) << e.what();
  const std::string map_over_list = file("m.yaml", "model:\n  hidden: {width: 4}\n");
  const ConfigError m = config_error([&] { load_config(std::vector<std::string>{base_, map_over_list}); });
  EXPECT_EQ(m.where().str(), map_over_list + ":2:11") << m.what();
  EXPECT_EQ(m.key(), "model.hidden");
}

TEST_F(StackedConfigs, LaterProblemsPointAtTheFileTheWinningValueCameFrom) {
  file("bad_base.yaml",
       "data: {dataset: synthetic, batch_size: 0}\n"
       "train: {epohcs: 3}\n"
       "model: {layers: [flatten, {type: linear, out_features: 0}]}\n");
  const std::string child = file("child.yaml", "extends: bad_base.yaml\nname: c\n");
  std::string text;
  try {
    load_config(child);
  } catch (const ConfigErrors& e) {  // every problem, one a line
    text = e.what();
  }
  const std::string bad_base = (dir_ / "bad_base.yaml").string();
  EXPECT_NE(text.find(bad_base + ":1:40: data.batch_size: must be >= 1"), std::string::npos) << text;
  EXPECT_NE(text.find(bad_base + ":2:9: train.epohcs: unknown key"), std::string::npos) << text;
  EXPECT_NE(text.find(bad_base + ":3:"), std::string::npos) << text;  // the layer, on its own line
  // A value the child gives over the base's is blamed on the child.
  const std::string fixed = file("fixed.yaml", "extends: bad_base.yaml\ndata: {batch_size: -1}\n");
  const std::string fixed_text = config_error([&] { load_config(fixed); }).what();
  EXPECT_NE(fixed_text.find(fixed + ":2:20: data.batch_size"), std::string::npos) << fixed_text;
}

TEST_F(StackedConfigs, OneFileWithoutExtendsLoadsAndPrintsAsBefore) {
  const std::string text = "# An MLP\nname: plain\ndata: {dataset: synthetic}\n";
  const std::string plain = file("plain.yaml", text);
  EXPECT_EQ(standalone_config_text(plain), text);
  EXPECT_EQ(load_config(plain).sources.exact("name").str(), plain + ":2:7");
}

// gputrain configs prints a config that extends others merged: saved anywhere, it loads the same.
TEST_F(StackedConfigs, AMergedPrintLoadsTheSameSavedElsewhere) {
  const std::string child =
      file("bases/child.yaml", "# A child\n#\n# more\nextends: base.yaml\nname: child\ndata: {batch_size: 4}\n");
  const std::string text = standalone_config_text(child);
  EXPECT_EQ(text.rfind("# A child\n#\n# base.yaml + child.yaml merged into one", 0), 0u) << text;
  EXPECT_EQ(text.find("extends"), text.find("extends:`"));  // only in the note, not as a key
  TempDir elsewhere;
  const std::string saved = write_text(elsewhere / "mine.yaml", text).string();
  EXPECT_EQ(flatten_config(load_config(saved).config), flatten_config(load_config(child).config));
}

// Every shipped config, the Fashion-MNIST family's stacked ones among them.
TEST(ShippedConfigsStacked, EachPrintedMergedLoadsAsTheFileDoes) {
  const fs::path configs = fs::path(testing::kSourceDir) / "configs";
  TempDir elsewhere;
  int stacked = 0;
  for (const ShippedConfig& shipped : shipped_configs(configs)) {
    const std::string text = standalone_config_text(shipped.path.string());
    const std::string saved = write_text(elsewhere / (shipped.name + ".yaml"), text).string();
    EXPECT_EQ(flatten_config(load_config(saved).config), flatten_config(load_config(shipped.path.string()).config))
        << shipped.name;
    EXPECT_EQ(config_description(text), shipped.description) << shipped.name;
    stacked += text.find("merged into one") != std::string::npos;
  }
  EXPECT_GE(stacked, 5) << "configs/ shows configs building on configs on the Fashion-MNIST family";
}

}  // namespace
}  // namespace gputrain::config
