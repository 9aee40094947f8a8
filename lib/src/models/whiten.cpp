#include "gputrain/models/whiten.h"

#include <ATen/ops/linalg_eigh.h>
#include <fmt/format.h>
#include <torch/nn/functional/fold.h>
#include <torch/nn/modules/conv.h>

#include <algorithm>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/layer_keys.h"
#include "gputrain/data/pixel_map.h"

namespace gputrain::models {

std::map<std::string, int64_t> first_epochs_only(const torch::nn::Sequential& model,
                                                 const config::ModelConfig& config) {
  if (config.layers.empty() || config.layers.front().type != config::LayerType::kConv2d) return {};
  const config::LayerConfig& layer = config.layers.front();
  const int64_t epochs = config::layer_integer(layer, "whiten_bias_epochs");
  if (config::layer_integer(layer, "whiten") == 0 || epochs == 0 || model->size() == 0) return {};
  const std::string bias = model->named_children().begin()->key() + ".bias";
  if (!model->named_parameters().contains(bias)) return {};  // bias: false
  return {{bias, epochs}};
}

torch::Tensor whitening_filters(const torch::Tensor& images, int64_t kernel, double eps) {
  GPUTRAIN_CHECK(images.dim() == 4, "whitening_filters takes images [N, C, H, W] (got {} dimensions)", images.dim());
  const int64_t channels = images.size(1);
  const int64_t dims = channels * kernel * kernel;
  // [N, C·k·k, positions] -> one row per patch, its values in the filter's (C, kh, kw) order.
  const torch::Tensor patches =
      torch::nn::functional::unfold(images.to(torch::kFloat64), torch::nn::functional::UnfoldFuncOptions(kernel))
          .transpose(1, 2)
          .reshape({-1, dims});
  const torch::Tensor covariance = patches.t().mm(patches) / static_cast<double>(patches.size(0));
  const auto [eigenvalues, eigenvectors] = at::linalg_eigh(covariance, "U");
  const torch::Tensor filters =
      (eigenvectors.t() / torch::sqrt(eigenvalues + eps).unsqueeze(1)).reshape({dims, channels, kernel, kernel});
  return torch::cat({filters, -filters}).to(torch::kFloat32);
}

void check_whitening_data(const config::ModelConfig& config, const data::DatasetInfo& train) {
  if (config.layers.empty() || config.layers.front().type != config::LayerType::kConv2d || train.images) return;
  const config::LayerConfig& layer = config.layers.front();
  if (config::layer_integer(layer, "whiten") == 0) return;
  throw ConfigError(layer.mark, fmt::format("{} ({})", layer.path, config::word(layer.type)),
                    fmt::format("`whiten` computes its filters from the training images' pixels, and data set '{}' "
                                "holds no images (its samples are not uint8 pixels); set whiten: 0, or give the "
                                "images as uint8 arrays ([N, C, H, W] or [N, H, W])",
                                train.name));
}

void whiten_first_conv(torch::nn::Sequential& model, const config::ModelConfig& config, const data::Dataset& train,
                       const config::NormalizeConfig& normalize) {
  if (config.layers.empty() || config.layers.front().type != config::LayerType::kConv2d) return;
  const config::LayerConfig& layer = config.layers.front();
  const int64_t wanted = config::layer_integer(layer, "whiten");
  if (wanted == 0) return;
  auto* conv = model->ptr(0)->as<torch::nn::Conv2dImpl>();
  GPUTRAIN_CHECK(conv != nullptr, "the first module of a network whose first layer whitens is not a Conv2d");
  const int64_t count = std::min<int64_t>(wanted, train.info().samples);
  const std::vector<int64_t>& shape = train.info().input_shape;
  GPUTRAIN_CHECK(train.info().images && shape.size() == 3, "whitening needs images");
  torch::Tensor pixels = torch::empty({count, shape[0], shape[1], shape[2]}, torch::kUInt8);
  if (train.resident()) {
    pixels.copy_(train.inputs().narrow(0, 0, count));
  } else {
    for (int64_t i = 0; i < count; ++i) train.read_image(i, pixels[i].data_ptr<uint8_t>());
  }
  // byte × scale + shift per channel, in float32, as the loaders make a model's input.
  const std::vector<data::ChannelMap> maps = data::channel_maps(normalize.mean, normalize.std, shape[0]);
  std::vector<float> scale, shift;
  for (const data::ChannelMap& m : maps) {
    scale.push_back(m.scale);
    shift.push_back(m.shift);
  }
  const torch::Tensor images =
      pixels.to(torch::kFloat32) * torch::tensor(scale).view({1, -1, 1, 1}) + torch::tensor(shift).view({1, -1, 1, 1});
  const torch::Tensor filters =
      whitening_filters(images, conv->options.kernel_size()->at(0), *config::layer_value(layer, "whiten_eps"));
  torch::NoGradGuard no_grad;
  conv->weight.copy_(filters);
}

}  // namespace gputrain::models
