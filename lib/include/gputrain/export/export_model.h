#pragma once
// `gputrain export --format onnx|pytorch`: saved weights as a model that runs
// without gputrain: an ONNX model (ONNX Runtime, TensorRT, a browser), or a
// PyTorch nn.Module's Python source beside its state dict.
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/files.h"
#include "gputrain/data/dataset.h"
#include "gputrain/export/onnx_graph.h"
#include "gputrain/plan/run_plan.h"

namespace gputrain::exporting {

enum class ModelFormat {
  kOnnx,     // one .onnx file
  kPytorch,  // a .py file defining the nn.Module class Model, and its state dict beside it (the same name, .pt)
};

// What the model's input holds. With kUnitImages an image model starts with
// the data set's normalisation (data.normalize), so it takes images as
// torchvision's ToTensor gives them, pixel / 255 in [0, 1]; the user's
// pipeline cannot then disagree with the training's, whose mean and std live
// in a config the model's user may never see. kNormalized leaves it out, for a
// pipeline that normalises itself (the values are in the metadata). Feature
// vectors go in as they are either way.
enum class ModelInputs { kUnitImages, kNormalized };

struct ModelExportOptions {
  ModelFormat format = ModelFormat::kOnnx;
  checkpoint::ExportedWeights weights = checkpoint::ExportedWeights::kEvaluated;
  ModelInputs inputs = ModelInputs::kUnitImages;
  bool force = false;                     // replace existing output files
  std::vector<std::string> config_files;  // --config: read, so never an output, force or not
  WriteHooks write_hooks;                 // tests' seam: none in gputrain
};

// The graph of `model` (weights loaded) for `info`'s samples: the input
// "input" [batch, sample...] (float32; batch is a dynamic dimension), first
// the loaders' pixel map when `inputs` is kUnitImages and the samples are
// images (the normalisation `mean`/`std`, per channel or one for all, empty:
// none, applied to 255 x as data::channel_maps says, so that the graph sees
// the floats gputrain's model sees), the layers
// (add_onnx_layers), then the output "logits" [batch, classes] (or
// "values" for regression). metadata_props: the data set, what the input
// holds, the normalisation, and the class names when the data set has them.
onnx::Graph onnx_graph(torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                       const std::vector<double>& mean, const std::vector<double>& std, ModelInputs inputs);

// The Python module that defines `model` as the nn.Module class Model: an
// nn.Sequential of the layers (pytorch_layers), whose state dict has
// gputrain's keys, so load_state_dict(torch.load(state_dict)) fits it
// strictly. With kUnitImages an image model maps its pixels first, as
// onnx_graph's does, by buffers that are not part of the state dict
// (persistent=False). Module constants: INPUT (what the input holds),
// NORMALIZE_MEAN and NORMALIZE_STD, CLASS_NAMES (empty when the data set has
// none), and with the pixel map PIXEL_SCALE and PIXEL_SHIFT.
// `state_dict` is the file name the docstring's example loads.
std::string pytorch_module(const torch::nn::Sequential& model, const std::string& name, const data::DatasetInfo& info,
                           const std::vector<double>& mean, const std::vector<double>& std, ModelInputs inputs,
                           const std::string& state_dict);

// Where --format pytorch writes the state dict: `py_path` with .pt for .py.
std::string pytorch_state_dict_path(const std::string& py_path);

struct ModelExportSummary {
  std::vector<std::string> files;  // written, the model first
  std::string weights;             // which weights were written, for the user
  std::string input;               // what the model's input holds, for the user
  int64_t parameters = 0;
};

// Builds the model `plan` describes (plan::Purpose::kExport) on the CPU, loads the
// weights of `weights_path` (a checkpoint, a model.pt or a .safetensors file)
// and writes it in `options.format` to `out_path` (.py for pytorch, with the
// state dict beside it), each file atomically and none when any fails. No
// output may be the weights file or one of `options.config_files`, and an existing one
// is replaced only with `force` (check_output_file). A layer ONNX cannot
// express is a UserError naming it. The plan's train.tta views are not inside
// the network: a run with them logs so, and the ONNX metadata
// (test_time_views) and the Python module (TEST_TIME_VIEWS) say so.
ModelExportSummary export_model(const plan::RunPlan& plan, const std::string& weights_path, const std::string& out_path,
                                const ModelExportOptions& options);

}  // namespace gputrain::exporting
