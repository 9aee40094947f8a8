#include <yaml-cpp/yaml.h>

#include "gputrain/config/load.h"

namespace gputrain::config {

namespace {
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& entry : node) flatten(entry.second, prefix + entry.first.as<std::string>() + ".", out);
    return;
  }
  YAML::Emitter text;
  text << YAML::Flow << node;
  out[prefix.substr(0, prefix.size() - 1)] = text.c_str();
}
}  // namespace

std::map<std::string, std::string> flatten_config(const ExperimentConfig& config) {
  std::map<std::string, std::string> out;
  flatten(YAML::Load(dump_config(config)), "", out);
  return out;
}

}  // namespace gputrain::config
