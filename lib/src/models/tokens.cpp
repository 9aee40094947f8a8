#include "tokens.h"

#include <ATen/ops/scaled_dot_product_attention.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/functional/conv.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>

#include <cmath>

namespace gputrain::models::detail {

PatchEmbeddingImpl::PatchEmbeddingImpl(int64_t channels, int64_t width, int64_t patch, bool bias)
    : channels(channels), width(width), patch(patch), with_bias(bias) {
  reset();
}

void PatchEmbeddingImpl::reset() {
  // torchvision's conv_proj: a normal of std sqrt(1 / fan_in) (truncated at ±2, which so small a std
  // never reaches), a zero bias.
  weight = register_parameter("weight", torch::empty({width, channels, patch, patch}));
  torch::nn::init::normal_(weight, 0, std::sqrt(1.0 / static_cast<double>(channels * patch * patch)));
  if (with_bias) bias = register_parameter("bias", torch::zeros({width}));
}

torch::Tensor PatchEmbeddingImpl::forward(const torch::Tensor& images) {
  namespace F = torch::nn::functional;
  // [N, D, H/p, W/p] -> [N, H/p * W/p, D]: the positions row by row, as torchvision's _process_input.
  return F::conv2d(images, weight, F::Conv2dFuncOptions().bias(bias).stride(patch)).flatten(2).transpose(1, 2);
}

void PatchEmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("PatchEmbedding({}, {}, patch={}, bias={})", channels, width, patch, with_bias);
}

HoistedTensorImpl::HoistedTensorImpl(Kind kind, std::string name, torch::Tensor value)
    : kind(kind), name(std::move(name)), value(std::move(value)) {
  this->value.set_requires_grad(true);
}

torch::Tensor HoistedTensorImpl::forward(const torch::Tensor& tokens) {
  if (kind == Kind::kPositionEmbedding) return tokens + value;
  return torch::cat({value.expand({tokens.size(0), -1, -1}), tokens}, 1);
}

std::shared_ptr<torch::nn::Module> HoistedTensorImpl::clone(const std::optional<torch::Device>& device) const {
  torch::NoGradGuard no_grad;
  torch::Tensor copy = value.clone();
  if (device) copy = copy.to(*device);
  auto cloned = std::make_shared<HoistedTensorImpl>(kind, name, copy.detach());
  cloned->value.set_requires_grad(value.requires_grad());
  cloned->train(is_training());
  return cloned;
}

void HoistedTensorImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("{}([{}])", kind == Kind::kClassToken ? "ClassToken" : "PositionEmbedding",
                        fmt::join(value.sizes(), ", "));
}

SelfAttentionImpl::SelfAttentionImpl(int64_t width, int64_t heads, double dropout, bool bias)
    : width(width), heads(heads), dropout(dropout), with_bias(bias) {
  reset();
}

void SelfAttentionImpl::reset() {
  // torch.nn.MultiheadAttention's: Xavier-uniform projections, zero biases.
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * width, width}));
  torch::nn::init::xavier_uniform_(in_proj_weight);
  if (with_bias) in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * width}));
  out_proj = register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(width, width).bias(with_bias)));
  if (with_bias) {
    torch::NoGradGuard no_grad;
    out_proj->bias.zero_();
  }
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& tokens) {
  const int64_t batch = tokens.size(0);
  const int64_t length = tokens.size(1);
  // [N, T, 3 D] -> 3 x [N, heads, T, D / heads]
  const torch::Tensor qkv = torch::nn::functional::linear(tokens, in_proj_weight, in_proj_bias)
                                .view({batch, length, 3, heads, width / heads})
                                .permute({2, 0, 3, 1, 4});
  const torch::Tensor attended =
      at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{}, is_training() ? dropout : 0.0);
  return out_proj->forward(attended.transpose(1, 2).reshape({batch, length, width}));
}

void SelfAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("SelfAttention({}, heads={}, dropout={}, bias={})", width, heads, dropout, with_bias);
}

void TokenImpl::pretty_print(std::ostream& stream) const { stream << fmt::format("Token(index={})", index); }

}  // namespace gputrain::models::detail
