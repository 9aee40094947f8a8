#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "gputrain/config/load.h"

namespace gputrain::config {

namespace {

using Leaves = std::vector<std::pair<std::string, std::string>>;

void flatten(const YAML::Node& node, const std::string& prefix, Leaves& out) {
  // A section is a block mapping; a key whose value is a mapping (tracking.mlflow.tags) is dumped in flow style.
  if (node.IsMap() && node.Style() != YAML::EmitterStyle::Flow) {
    for (const auto& entry : node) flatten(entry.second, prefix + entry.first.as<std::string>() + ".", out);
    return;
  }
  YAML::Emitter text;
  text << YAML::Flow << node;
  out.emplace_back(prefix.substr(0, prefix.size() - 1), text.c_str());
}

// Every leaf of dump_config, in its order.
Leaves leaves(const ExperimentConfig& config) {
  Leaves out;
  flatten(YAML::Load(dump_config(config)), "", out);
  return out;
}

}  // namespace

std::map<std::string, std::string> flatten_config(const ExperimentConfig& config) {
  const Leaves all = leaves(config);
  return {all.begin(), all.end()};
}

std::string explain_config(const LoadedConfig& loaded) {
  // A declared network's model.layers is hundreds of characters on one line:
  // the value column fits the short values, and a longer one pushes only its own row's source right.
  constexpr std::size_t kWidestAlignedValue = 48;
  const Leaves all = leaves(loaded.config);
  std::size_t key_width = 3;
  std::size_t value_width = 5;
  for (const auto& [key, value] : all) {
    key_width = std::max(key_width, key.size());
    if (value.size() <= kWidestAlignedValue) value_width = std::max(value_width, value.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {}\n", "key", key_width, "value", value_width, "from");
  for (const auto& [key, value] : all) {
    const SourceMark mark = loaded.sources.exact(key);
    out +=
        fmt::format("{:<{}}  {:<{}}  {}\n", key, key_width, value, value_width, mark.known() ? mark.str() : "default");
  }
  return out;
}

}  // namespace gputrain::config
