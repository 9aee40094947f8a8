#pragma once
// The experiment files that come with gputrain (the source tree's configs/,
// installed beside the binary): `gputrain configs` lists them, one line each,
// and prints one by name.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace gputrain::config {

struct ShippedConfig {
  std::string name;  // the file's stem: "fashion_mnist"
  std::filesystem::path path;
  std::string description;  // the file's first line, a comment: what it trains, on what
};

// Every *.yaml in `dir`, sorted by name. UserError (exit 2) when `dir` is not
// a directory that can be read: an installation without its configs.
std::vector<ShippedConfig> shipped_configs(const std::filesystem::path& dir);

// The one named `name` (with or without ".yaml"). UserError (exit 2) for an
// unknown name, naming the nearest ones and `gputrain configs`.
ShippedConfig find_shipped_config(const std::filesystem::path& dir, std::string_view name);

// The description of a config's text: its first line when that is a comment
// ("# An MLP on ..." -> "An MLP on ..."), else "".
std::string config_description(std::string_view text);

}  // namespace gputrain::config
