#include <iostream>

#include "commands.h"
#include "gputrain/config/load.h"

namespace gputrain::app {

int run_config(const ConfigArgs& args) {
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
  std::cout << config::dump_config(loaded.config);
  return 0;
}

}  // namespace gputrain::app
