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

}  // namespace
}  // namespace gputrain::config
