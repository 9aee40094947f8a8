#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"

namespace gputrain::app {

int run_config(const ConfigArgs& args) {
  if (args.keys) {
    std::cout << config::key_table();
    return 0;
  }
  if (args.config.empty()) throw UserError("--config is required (or --keys for the key table)");
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
  std::cout << (args.explain ? config::explain_config(loaded) : config::dump_config(loaded.config));
  return 0;
}

}  // namespace gputrain::app
