#pragma once
// `gputrain export --format onnx`: saved weights as an ONNX model that runs
// without gputrain or PyTorch (ONNX Runtime, TensorRT, a browser).
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/data/dataset.h"
#include "gputrain/onnx/graph.h"
#include "gputrain/plan/saved_weights.h"

namespace gputrain::train {

// What the model's input holds. With kUnitImages an image model starts with
// the data set's normalisation (data.normalize), so it takes images as
// torchvision's ToTensor gives them, pixel / 255 in [0, 1]; the user's
// pipeline cannot then disagree with the training's, whose mean and std live
// in a config the model's user may never see. kNormalized leaves it out, for a
// pipeline that normalises itself (the values are in the metadata). Feature
// vectors go in as they are either way.
enum class OnnxInputs { kUnitImages, kNormalized };

struct OnnxExportOptions {
  checkpoint::ExportedWeights weights = checkpoint::ExportedWeights::kEvaluated;
  OnnxInputs inputs = OnnxInputs::kUnitImages;
  bool force = false;  // replace an existing output file
};

// The graph of `model` (weights loaded) for `info`'s samples: the input
// "input" [batch, sample...] (float32; batch is a dynamic dimension), the
// normalisation `mean`/`std` first (per channel, or one for all; empty: none)
// when `inputs` is kUnitImages and the samples are images, the layers
// (models::add_onnx_layers), then the output "logits" [batch, classes] (or
// "values" for regression). metadata_props: the data set, what the input
// holds, the normalisation, and the class names when the data set has them.
onnx::Graph onnx_graph(torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                       const std::vector<double>& mean, const std::vector<double>& std, OnnxInputs inputs);

struct OnnxExportSummary {
  std::string weights;  // which weights were written, for the user
  std::string input;    // what the model's input holds, for the user
  int64_t nodes = 0;
  int64_t parameters = 0;
};

// Builds the model `plan` describes (WeightsUse::kExport) on the CPU, loads the weights of
// `weights_path` (a checkpoint or a model.pt) and writes its ONNX model to
// `out_path`, atomically. `out_path` may not be the checkpoint, and replaces
// an existing file only with `force` (check_output_file). A layer ONNX cannot
// express is a UserError naming it.
OnnxExportSummary export_onnx(const plan::SavedWeightsPlan& plan, const std::string& weights_path,
                              const std::string& out_path, const OnnxExportOptions& options);

}  // namespace gputrain::train
