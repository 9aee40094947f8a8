// `gputrain config --explain`: each key, its value, and where the value came from.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "gputrain/config/load.h"

namespace gputrain::config {
namespace {

// The explain line of `key`, its columns split on runs of spaces.
std::vector<std::string> columns_of(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> columns;
    for (std::string word; words >> word;) columns.push_back(word);
    if (!columns.empty() && columns.front() == key) return columns;
  }
  return {};
}

TEST(ConfigExplain, SaysWhereEachValueCameFrom) {
  const LoadedConfig loaded = load_config_text("name: demo\ndata:\n  batch_size: 32\n  samples: 64\n", "exp.yaml",
                                               {"train.epochs=3", "data.samples=128"});
  const std::string text = explain_config(loaded);
  EXPECT_EQ(columns_of(text, "name"), (std::vector<std::string>{"name", "demo", "exp.yaml:1:7"})) << text;
  EXPECT_EQ(columns_of(text, "data.batch_size"), (std::vector<std::string>{"data.batch_size", "32", "exp.yaml:3:15"}));
  EXPECT_EQ(columns_of(text, "train.epochs"),
            (std::vector<std::string>{"train.epochs", "3", "--set", "#1", "(train.epochs=3)"}));
  // --set over a key the file gives: the --set wins, and is named.
  EXPECT_EQ(columns_of(text, "data.samples"),
            (std::vector<std::string>{"data.samples", "128", "--set", "#2", "(data.samples=128)"}));
  EXPECT_EQ(columns_of(text, "optim.lr"), (std::vector<std::string>{"optim.lr", "0.01", "default"}));
  // Every key once, after a header.
  EXPECT_EQ(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')),
            flatten_config(loaded.config).size() + 1);
  EXPECT_EQ(text.rfind("key ", 0), 0u);
}

TEST(ConfigExplain, ABatchMadeFromTheMicroBatchSaysSo) {
  const LoadedConfig loaded =
      load_config_text("data:\n  micro_batch_size: 16\ntrain: {accumulation_steps: 3}\n", "exp.yaml");
  const std::string text = explain_config(loaded);
  EXPECT_EQ(columns_of(text, "data.micro_batch_size"),
            (std::vector<std::string>{"data.micro_batch_size", "16", "exp.yaml:2:21"}))
      << text;
  // auto: the plan makes it 16 x 3 x processes; the line says where the batch is stated.
  EXPECT_EQ(columns_of(text, "data.batch_size"), (std::vector<std::string>{"data.batch_size", "auto", "exp.yaml:2:21"}))
      << text;
}

// A declared network's model.layers (hundreds of characters) widened every row
// past the terminal: the short values stay aligned, the long one is whole.
TEST(ConfigExplain, ALongValueWidensOnlyItsOwnRow) {
  std::string layers = "model:\n  name: layers\n  layers:\n";
  for (int i = 0; i < 12; ++i) layers += "    - {type: linear, out_features: " + std::to_string(100 + i) + "}\n";
  const LoadedConfig loaded = load_config_text(layers, "exp.yaml");
  const std::string text = explain_config(loaded);
  std::istringstream lines(text);
  std::size_t widest_short_row = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("out_features") == std::string::npos) widest_short_row = std::max(widest_short_row, line.size());
  }
  EXPECT_NE(text.find("out_features: 111"), std::string::npos) << text;
  EXPECT_LT(widest_short_row, 120u) << text;
}

}  // namespace
}  // namespace gputrain::config
