#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/plan/start.h"

namespace gputrain::app {

int run_config(const ConfigArgs& args) {
  if (args.keys) {
    std::cout << config::key_table();
    return 0;
  }
  if (args.config.empty() && args.resume.empty()) {
    throw UserError("--config is required (or --resume with a checkpoint, or --keys for the key table)");
  }
  plan::StartRequest request;
  request.purpose = plan::Purpose::kDescribe;
  request.command = "config";
  request.config_files = args.config;
  request.overrides = args.overrides;
  request.resume = args.resume;
  const config::LoadedConfig loaded = plan::starting_point(request).config;
  std::cout << (args.explain ? config::explain_config(loaded) : config::dump_config(loaded.config));
  return 0;
}

}  // namespace gputrain::app
