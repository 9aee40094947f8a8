#include <iostream>

#include "commands.h"
#include "gputrain/models/factory.h"
#include "gputrain/plan/start.h"

namespace gputrain::app {

int run_model(const ModelArgs& args) {
  plan::StartRequest request;
  request.purpose = plan::Purpose::kDescribe;
  request.command = "model";
  request.config_files = args.config;
  request.overrides = args.overrides;
  const plan::RunPlan plan = plan::start_run(request).run;
  std::cout << models::describe_model(plan.network, plan.trained);
  return 0;
}

}  // namespace gputrain::app
