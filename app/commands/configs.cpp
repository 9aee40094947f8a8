// `gputrain configs [NAME]`: the shipped experiment files, listed or printed.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/config/shipped.h"

namespace gputrain::app {

namespace fs = std::filesystem;

fs::path shipped_configs_dir() {
  // <binary>/../share/gputrain/configs: in the wheel the binary is
  // site-packages/gputrain/bin/gputrain; in a build tree it is
  // build/<preset>/app/gputrain, and CMake links build/<preset>/share/gputrain/configs
  // to the source tree's configs/.
  return fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "share" / "gputrain" / "configs";
}

CLI::App* add_configs_command(CLI::App& app, ConfigsArgs& args) {
  auto* configs = app.add_subcommand(
      "configs", "list the experiment files that come with gputrain, or print one (gputrain configs NAME > my.yaml)");
  configs->add_option("name", args.name, "the config to print, e.g. fashion_mnist");
  return configs;
}

int run_configs(const ConfigsArgs& args) {
  const fs::path dir = shipped_configs_dir();
  if (!args.name.empty()) {
    // A config that extends others is printed merged, so that it runs saved anywhere.
    std::cout << config::standalone_config_text(config::find_shipped_config(dir, args.name).path.string())
              << std::flush;
    return 0;
  }
  const std::vector<config::ShippedConfig> configs = config::shipped_configs(dir);
  std::size_t width = 0;
  for (const config::ShippedConfig& c : configs) width = std::max(width, c.name.size());
  for (const config::ShippedConfig& c : configs) std::cout << fmt::format("{:<{}}  {}\n", c.name, width, c.description);
  std::cout << fmt::format(
                   "\nPrint one with `gputrain configs NAME` (save it with `gputrain configs NAME > NAME.yaml` to edit "
                   "it); a relative path inside is relative to the folder gputrain runs in. They are in {}\n",
                   dir.lexically_normal().string())
            << std::flush;
  return 0;
}

}  // namespace gputrain::app
