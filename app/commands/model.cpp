#include <iostream>

#include "commands.h"
#include "gputrain/config/load.h"
#include "gputrain/models/factory.h"

namespace gputrain::app {

int run_model(const ModelArgs& args) {
  const config::LoadedConfig loaded = config::load_config(args.config, args.overrides);
  std::cout << models::describe_model(loaded.config.model, loaded.config.data, loaded.config.seed);
  return 0;
}

}  // namespace gputrain::app
