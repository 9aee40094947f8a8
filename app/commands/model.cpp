#include <iostream>

#include "commands.h"
#include "gputrain/config/load.h"
#include "gputrain/train/builder.h"

namespace gputrain::app {

int run_model(const ModelArgs& args) {
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
  std::cout << train::describe_model(loaded.config);
  return 0;
}

}  // namespace gputrain::app
