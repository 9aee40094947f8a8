#include "gputrain/config/shipped.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::config {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kNearestShown = 3;

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

std::string config_description(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  if (line.empty() || line[0] != '#') return "";
  return std::string(trim(line.substr(1)));
}

std::vector<ShippedConfig> shipped_configs(const fs::path& dir) {
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) {
    throw UserError(fmt::format(
        "{}: cannot list the shipped configs ({}); this installation lacks them: reinstall gputrain, or run it from "
        "a build of the source tree",
        dir.string(), error.message()));
  }
  std::vector<ShippedConfig> configs;
  for (const fs::directory_entry& entry : it) {
    if (entry.path().extension() != ".yaml" || !entry.is_regular_file()) continue;
    configs.push_back({entry.path().stem().string(), entry.path(), config_description(first_line(entry.path()))});
  }
  std::sort(configs.begin(), configs.end(),
            [](const ShippedConfig& a, const ShippedConfig& b) { return a.name < b.name; });
  return configs;
}

ShippedConfig find_shipped_config(const fs::path& dir, std::string_view name) {
  std::string wanted(name);
  if (fs::path(wanted).extension() == ".yaml") wanted = fs::path(wanted).stem().string();
  std::vector<ShippedConfig> configs = shipped_configs(dir);
  for (ShippedConfig& config : configs) {
    if (config.name == wanted) return std::move(config);
  }
  // The nearest by edit distance to the name's start, then to the whole name:
  // "fashoin" is nearer fashion_mnist than cifar10.
  const auto distance = [&wanted](const std::string& candidate) {
    return std::make_pair(edit_distance(wanted, candidate.substr(0, wanted.size())), edit_distance(wanted, candidate));
  };
  std::sort(configs.begin(), configs.end(), [&distance](const ShippedConfig& a, const ShippedConfig& b) {
    return distance(a.name) < distance(b.name);
  });
  std::vector<std::string> nearest;
  for (std::size_t i = 0; i < configs.size() && i < kNearestShown; ++i) nearest.push_back(configs[i].name);
  throw UserError(fmt::format("no shipped config is named '{}'{}; `gputrain configs` lists them all", printable(wanted),
                              nearest.empty() ? "" : "; the nearest: " + join_choices(nearest)));
}

}  // namespace gputrain::config
