#pragma once
// model.layers' token layers, a vision transformer's pieces (torchvision's
// vit_b_16): a sample of tokens is [T, D], T tokens of width D.
//   patch_embedding     CxHxW -> [H/p * W/p, D]: a p x p stride-p convolution, its
//                       output positions as tokens (row by row)
//   class_token         [T, D] -> [T + 1, D]: a learned token put first
//   position_embedding  [T, D] -> [T, D]: a learned [T, D] added
//   self_attention      [T, D] -> [T, D]: multi-head self-attention on
//                       at::scaled_dot_product_attention (flash or memory-efficient on a GPU)
//   token               [T, D] -> [D]: one token (the class token: 0)
// Parameters are named as torch.nn's: conv_proj.weight, self_attention.in_proj_weight,
// self_attention.out_proj.weight. A class token's and a position embedding's
// one parameter is registered by the list holding it, under the layer's name
// (torchvision's `class_token`, `encoder.pos_embedding`), as Hoisting says.
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <optional>

#include "layers.h"

namespace gputrain::models::detail {

class PatchEmbeddingImpl : public torch::nn::Cloneable<PatchEmbeddingImpl> {
 public:
  PatchEmbeddingImpl(int64_t channels, int64_t width, int64_t patch, bool bias);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& images);
  void pretty_print(std::ostream& stream) const override;

  int64_t channels, width, patch;
  bool with_bias;
  torch::Tensor weight, bias;  // [width, channels, patch, patch], [width]
};
TORCH_MODULE(PatchEmbedding);

// One learned tensor that the list holding the layer registers (see Hoisting).
class HoistedTensorImpl : public torch::nn::Module, public Hoisting {
 public:
  enum class Kind { kClassToken, kPositionEmbedding };
  HoistedTensorImpl(Kind kind, std::string name, torch::Tensor value);

  torch::Tensor forward(const torch::Tensor& tokens);
  std::shared_ptr<torch::nn::Module> clone(const std::optional<torch::Device>& device = std::nullopt) const override;
  void pretty_print(std::ostream& stream) const override;
  bool is_serializable() const override { return false; }  // the list saves its tensor
  std::vector<std::pair<std::string, torch::Tensor>> hoisted_parameters() const override { return {{name, value}}; }

  Kind kind;
  std::string name;     // the parameter's, in the list holding it: the layer's name
  torch::Tensor value;  // class token [1, 1, D]; position embedding [1, T, D]
};
TORCH_MODULE(HoistedTensor);

class SelfAttentionImpl : public torch::nn::Cloneable<SelfAttentionImpl> {
 public:
  SelfAttentionImpl(int64_t width, int64_t heads, double dropout, bool bias);
  void reset() override;
  torch::Tensor forward(const torch::Tensor& tokens);
  void pretty_print(std::ostream& stream) const override;

  int64_t width, heads;
  double dropout;
  bool with_bias;
  torch::Tensor in_proj_weight, in_proj_bias;  // [3 D, D], [3 D]: the queries', keys' and values' projections
  torch::nn::Linear out_proj{nullptr};
};
TORCH_MODULE(SelfAttention);

class TokenImpl : public torch::nn::Cloneable<TokenImpl> {
 public:
  explicit TokenImpl(int64_t index) : index(index) {}
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& tokens) { return tokens.select(1, index); }
  void pretty_print(std::ostream& stream) const override;

  int64_t index;
};
TORCH_MODULE(Token);

}  // namespace gputrain::models::detail
