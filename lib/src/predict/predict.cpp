#include "gputrain/predict/predict.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gputrain/data/host_loader.h"
#include "gputrain/data/prediction_inputs.h"
#include "gputrain/train/evaluate.h"

namespace gputrain::predict {

namespace {
std::vector<std::string> class_labels(const data::DatasetInfo& info) {
  if (!info.class_names.empty()) return info.class_names;
  std::vector<std::string> labels;
  for (int64_t c = 0; c < info.classes; ++c) labels.push_back(std::to_string(c));
  return labels;
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}
}  // namespace

torch::Tensor predict_outputs(const plan::RunPlan& plan, const std::string& weights_path,
                              const data::PredictionInputs& inputs) {
  auto [strategy, model] =
      train::load_saved_model(plan.network, plan.trained, plan.devices, weights_path, "predicting");
  model->eval();
  torch::NoGradGuard no_grad;
  const train::TestTimeAugmentation tta = train::test_time_augmentation(plan.evaluation.tta);
  if (plan.trained.images) spdlog::info("test-time views: {}", train::describe_views(tta));
  data::HostLoader batches(inputs.dataset, plan.test_loader);
  batches.start_epoch(0);
  std::vector<torch::Tensor> outputs;
  while (auto batch = batches.next()) {
    outputs.push_back(train::test_time_outputs(model, *strategy, batch->inputs, tta).to(torch::kCPU, torch::kFloat32));
  }
  return torch::cat(outputs);
}

void write_predictions(const plan::RunPlan& plan, const std::string& weights_path, const std::string& input_path,
                       std::ostream& out) {
  const data::DatasetInfo& info = plan.trained;
  const data::PredictionInputs inputs = data::read_prediction_inputs(input_path, plan.data, info);
  torch::Tensor outputs = predict_outputs(plan, weights_path, inputs);

  const bool classification = info.target_kind == data::TargetKind::kClasses;
  const std::vector<std::string> labels = class_labels(info);
  const bool named = !info.class_names.empty();
  std::string header = named ? "sample,prediction,class_name" : "sample,prediction";
  if (classification) {
    for (const auto& label : labels) header += "," + field("p_" + label);
  } else if (info.targets > 1) {
    header = "sample";
    for (int64_t t = 0; t < info.targets; ++t) header += fmt::format(",value_{}", t);
  } else {
    header = "sample,value";
  }
  out << header << "\n";

  if (classification) outputs = torch::softmax(outputs, 1);
  const torch::Tensor best = classification ? outputs.argmax(1) : torch::Tensor();  // one op, not one per row
  const auto rows = outputs.accessor<float, 2>();
  for (int64_t row = 0; row < outputs.size(0); ++row) {
    std::string line = field(inputs.names.at(static_cast<std::size_t>(row)));
    if (classification) {
      const int64_t predicted = best.data_ptr<int64_t>()[row];
      line += fmt::format(",{}", predicted);
      if (named) line += "," + field(info.class_names.at(static_cast<std::size_t>(predicted)));
    }
    for (int64_t column = 0; column < outputs.size(1); ++column) line += fmt::format(",{:.6g}", rows[row][column]);
    out << line << "\n";
  }
}

}  // namespace gputrain::predict
