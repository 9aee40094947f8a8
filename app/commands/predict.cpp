#include <spdlog/spdlog.h>

#include <iostream>
#include <sstream>

#include "commands.h"
#include "gputrain/common/files.h"
#include "gputrain/common/output_file.h"
#include "gputrain/plan/start.h"
#include "gputrain/predict/predict.h"

namespace gputrain::app {

int run_predict(const PredictArgs& args) {
  if (!args.out.empty()) {
    std::vector<NamedPath> inputs{{"--checkpoint", args.checkpoint}, {"--input", args.input}};
    for (const std::string& file : args.config) inputs.push_back({"--config", file});
    check_output_file(args.out, inputs, args.force);
  }
  const plan::RunPlan plan = saved_weights_plan(plan::Purpose::kPredict, "predict", args);
  if (args.out.empty()) {
    predict::write_predictions(plan, args.checkpoint, args.input, std::cout);
    return 0;
  }
  // Whole or not at all: an earlier predictions file survives a failure.
  std::ostringstream rows;
  predict::write_predictions(plan, args.checkpoint, args.input, rows);
  write_atomically(args.out, rows.str());
  spdlog::info("predictions: {}", args.out);
  return 0;
}

}  // namespace gputrain::app
