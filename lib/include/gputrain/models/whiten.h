#pragma once
// A conv2d layer's `whiten` (airbench's init_whiten): its filters whiten the
// patches of the training images, computed once at run start.
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/dataset.h"

namespace gputrain::models {

// Filters [2 × C × k², C, k, k] for `images` (float [N, C, H, W]): from the
// covariance Σ of all their k × k patches (every position, stride 1, no
// padding; uncentred, as airbench's), with Σ = V diag(λ) Vᵀ, filter i is
// column i of V / sqrt(λ_i + eps) and filter C k² + i its negative. So the
// first half of the convolution's outputs on those patches has covariance
// diag(λ / (λ + eps)): the identity where λ >> eps. Computed in float64; the
// same images give the same filters.
torch::Tensor whitening_filters(const torch::Tensor& images, int64_t kernel, double eps);

// When the first layer of `config` (model.layers) is a conv2d with `whiten`
// N > 0: sets the first module of `model` (that convolution) to the
// whitening_filters of the first N images of `train` (all of them if fewer),
// normalised as the loaders do (`normalize`). Nothing otherwise.
void whiten_first_conv(torch::nn::Sequential& model, const config::ModelConfig& config, const data::Dataset& train,
                       const config::NormalizeConfig& normalize);

// ConfigError at the layer when the first layer whitens and `train` (its
// info) holds no images: whitening reads pixel bytes, which float samples
// (an npy data set of float32 arrays) do not have.
void check_whitening_data(const config::ModelConfig& config, const data::DatasetInfo& train);

// The parameters that train for their first epochs only, by name in
// `model`'s named_parameters, with that count: the whitening convolution's
// bias with `whiten_bias_epochs` N > 0. Empty otherwise.
std::map<std::string, int64_t> first_epochs_only(const torch::nn::Sequential& model, const config::ModelConfig& config);

}  // namespace gputrain::models
