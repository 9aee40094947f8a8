#include "gputrain/models/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <algorithm>
#include <array>

#include "gputrain/device/host_resources.h"
#include "layers.h"
#include "residual.h"
#include "sync_batchnorm.h"
#include "tokens.h"

namespace gputrain::models {

ModelShape model_shape(const data::DatasetInfo& info, const config::ModelConfig& model) {
  ModelShape shape;
  shape.input_shape = info.input_shape;
  switch (info.target_kind) {
    case data::TargetKind::kClasses:
      shape.outputs = info.classes;
      break;
    case data::TargetKind::kValues:
      shape.outputs = info.targets;
      break;
    case data::TargetKind::kNone:
      shape.outputs = model.out_features.value_or(info.input_shape.back());
      break;
  }
  return shape;
}

torch::nn::Sequential make_model(const config::ModelConfig& config, const ModelShape& shape) {
  // The explicit registry: a new model is a case here (and a word in config's table), not a static initialiser.
  switch (config.name) {
    case config::ModelName::kLinear:
      return detail::make_linear(config, shape);
    case config::ModelName::kMlp:
      return detail::make_mlp(config, shape);
    case config::ModelName::kCifar10Cnn:
      return detail::make_cifar_cnn(config, shape);
    case config::ModelName::kLayers:
      return detail::make_declared(config, shape);
  }
  config::unhandled(config.name);
}

torch::nn::Sequential build_model(const config::ModelConfig& config, const data::DatasetInfo& info,
                                  const torch::Device& device) {
  torch::nn::Sequential model = make_model(config, model_shape(info, config));
  model->to(device);
  return model;
}

std::string describe_model(const config::ModelConfig& model, const data::DatasetInfo& info) {
  torch::nn::Sequential built =
      device::with_resource_errors(fmt::format("building the model ({})", config::word(model.name)), kSmallerModel,
                                   [&] { return build_model(model, info, torch::kCPU); });
  return fmt::format("model {} for {} samples shaped {} ({} outputs)\n", config::word(model.name), info.name,
                     fmt::join(info.input_shape, "x"), model_shape(info, model).outputs) +
         layer_table(trace_layers(built, info.input_shape));
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t count = 0;
  for (const auto& parameter : model.parameters()) count += parameter.numel();
  return count;
}

namespace {
// Forwards `x` through `layers`, a row per layer; a residual or a sequential recurses into its lists.
void trace(torch::nn::Sequential& layers, const std::string& prefix, int depth, torch::Tensor& x,
           std::vector<LayerRow>& rows) {
  const auto children = detail::named_layers(layers);
  for (std::size_t i = 0; i < children.size(); ++i) {
    const std::string name = prefix + children[i].first;
    const torch::nn::Module& module = *children[i].second;
    LayerRow row{name, detail::pretty(module), {}, parameter_count(module), 0, depth};
    if (const auto* hoisting = dynamic_cast<const detail::Hoisting*>(&module)) {
      for (const auto& [key, tensor] : hoisting->hoisted_parameters()) row.parameters += tensor.numel();
    }
    auto* residual = layers->ptr(i)->as<detail::ResidualImpl>();
    auto* list = layers->ptr(i)->as<torch::nn::SequentialImpl>();
    if (residual != nullptr || list != nullptr) {
      const std::size_t at = rows.size();
      rows.push_back(row);
      if (list != nullptr) {
        torch::nn::Sequential inner(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(layers->ptr(i)));
        trace(inner, name + ".", depth + 1, x, rows);
      } else {
        // An inline residual's layers are named in this list; it holds no parameters of its own.
        torch::Tensor branch = x;
        trace(residual->layers, residual->is_inline ? prefix : name + ".layers.", depth + 1, branch, rows);
        torch::Tensor shortcut = x;
        if (!residual->shortcut.is_empty()) {
          trace(residual->shortcut, residual->is_inline ? prefix : name + ".shortcut.", depth + 1, shortcut, rows);
        }
        x = branch + shortcut;
        rows[at].parameters = 0;
      }
      for (std::size_t inner = at + 1; inner < rows.size(); ++inner) {
        if (rows[inner].depth == depth + 1) {
          rows[at].macs += rows[inner].macs;
          if (residual != nullptr) rows[at].parameters += rows[inner].parameters;
        }
      }
      rows[at].output_shape = x.sizes().slice(1).vec();
      continue;
    }
    x = (layers->begin() + static_cast<std::ptrdiff_t>(i))->forward(x);
    if (const auto* linear = module.as<torch::nn::LinearImpl>()) {
      row.macs = linear->weight.numel() * (x.numel() / x.size(-1));
    } else if (const auto* conv = module.as<torch::nn::Conv2dImpl>()) {
      row.macs = conv->weight.numel() * x.size(-2) * x.size(-1);  // each output pixel: one pass over the kernel
    } else if (const auto* patches = module.as<detail::PatchEmbeddingImpl>()) {
      row.macs = patches->weight.numel() * x.size(1);  // each token: one pass over its patch
    } else if (const auto* attention = module.as<detail::SelfAttentionImpl>()) {
      // Per token: its query, key, value and output projections (4 D²), and its scores and sum over T tokens (2 T D).
      const int64_t tokens = x.size(1);
      const int64_t width = attention->width;
      row.macs = tokens * 4 * width * width + 2 * tokens * tokens * width;
    }
    row.output_shape = x.sizes().slice(1).vec();
    rows.push_back(row);
  }
}

std::string grouped(int64_t value) {
  std::string digits = std::to_string(value);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<std::size_t>(at), ",");
  return digits;
}
}  // namespace

std::vector<LayerRow> trace_layers(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape) {
  std::vector<LayerRow> rows;
  detail::trace_zero_sample(model, sample_shape, [&](torch::Tensor& x) { trace(model, "", 0, x, rows); });
  return rows;
}

int64_t forward_macs(const std::vector<LayerRow>& rows) {
  int64_t macs = 0;
  for (const auto& row : rows) {
    if (row.depth == 0) macs += row.macs;
  }
  return macs;
}

std::string layer_table(const std::vector<LayerRow>& rows) {
  std::vector<std::array<std::string, 5>> cells{{"layer", "module", "output", "params", "FLOPs"}};
  int64_t parameters = 0;
  int64_t macs = 0;
  for (const auto& row : rows) {
    cells.push_back({std::string(2 * static_cast<std::size_t>(row.depth), ' ') + row.name, row.module,
                     fmt::format("{}", fmt::join(row.output_shape, "x")), grouped(row.parameters),
                     grouped(2 * row.macs)});
    if (row.depth == 0) {
      parameters += row.parameters;
      macs += row.macs;
    }
  }
  cells.push_back({"total", "", "", grouped(parameters), grouped(2 * macs)});
  std::array<std::size_t, 5> widths{};
  for (const auto& line : cells) {
    for (std::size_t column = 0; column < widths.size(); ++column) {
      widths[column] = std::max(widths[column], line[column].size());
    }
  }
  std::string text;
  for (const auto& line : cells) {
    text += fmt::format("{:<{}}  {:<{}}  {:>{}}  {:>{}}  {:>{}}\n", line[0], widths[0], line[1], widths[1], line[2],
                        widths[2], line[3], widths[3], line[4], widths[4]);
  }
  return text + fmt::format("forward FLOPs per sample: {} ({:.3g} M); parameters: {} ({:.3g} MiB as float32)\n",
                            grouped(2 * macs), 2.0 * static_cast<double>(macs) / 1e6, grouped(parameters),
                            4.0 * static_cast<double>(parameters) / (1024.0 * 1024.0));
}

std::vector<std::string> layer_summary(const torch::nn::Sequential& model) {
  std::vector<std::string> lines;
  for (const auto& layer : model->named_modules("", /*include_self=*/false)) {
    if (layer.value()->as<torch::nn::SequentialImpl>()) continue;  // a residual's branch: its layers follow
    lines.push_back(
        fmt::format("{}: {} {} params", layer.key(), detail::pretty(*layer.value()), parameter_count(*layer.value())));
  }
  return lines;
}

int64_t share_batch_statistics(torch::nn::Sequential& model, const SumAcrossProcesses& sum) {
  int64_t layers = 0;
  for (const auto& module : model->modules(/*include_self=*/false)) {
    if (auto* batchnorm = module->as<detail::SyncBatchNormImpl>()) {
      batchnorm->share_statistics(sum);
      ++layers;
    }
  }
  return layers;
}

}  // namespace gputrain::models
