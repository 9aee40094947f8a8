#include "gputrain/export/onnx_layers.h"

#include <fmt/format.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <map>

#include "gputrain/common/error.h"
#include "layers.h"
#include "residual.h"
#include "sync_batchnorm.h"
#include "tokens.h"

namespace gputrain::exporting {

namespace detail = models::detail;

namespace {

using onnx::Attribute;

template <std::size_t D>
std::vector<int64_t> ints(const torch::ExpandingArray<D>& array) {
  return {(*array).begin(), (*array).end()};
}

// ONNX's pads list each axis's start, then each axis's end; torch pads both ends alike.
std::vector<int64_t> both_ends(const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

class OnnxLayers {
 public:
  explicit OnnxLayers(onnx::Graph& graph) : graph_(graph) {}

  // `layers` from the value `value`; `x` is a traced sample of it, which leaves as the last layer's output.
  std::string add(torch::nn::Sequential& layers, const std::string& prefix, std::string value, torch::Tensor& x) {
    const auto children = detail::named_layers(layers);
    for (std::size_t i = 0; i < children.size(); ++i) {
      const std::string name = prefix + children[i].first;
      if (auto* residual = layers->ptr(i)->as<detail::ResidualImpl>()) {
        // An inline residual's layers are named in this list.
        const bool inline_ = residual->is_inline;
        torch::Tensor branch = x;
        const std::string branch_value = add(residual->layers, inline_ ? prefix : name + ".layers.", value, branch);
        torch::Tensor shortcut = x;
        const std::string shortcut_value =
            residual->shortcut.is_empty()
                ? value
                : add(residual->shortcut, inline_ ? prefix : name + ".shortcut.", value, shortcut);
        value = graph_.add("Add", {branch_value, shortcut_value}, name);
        x = branch + shortcut;
        continue;
      }
      if (layers->ptr(i)->as<torch::nn::SequentialImpl>()) {
        torch::nn::Sequential inner(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(layers->ptr(i)));
        value = add(inner, name + ".", value, x);
        continue;
      }
      const torch::Tensor output = (layers->begin() + static_cast<std::ptrdiff_t>(i))->forward(x);
      value = layer(name, *children[i].second, value, x, output);
      x = output;
    }
    return value;
  }

 private:
  // One layer that is not a residual, from `value`; `input` and `output` are its traced sample's.
  std::string layer(const std::string& name, const torch::nn::Module& module, const std::string& value,
                    const torch::Tensor& input, const torch::Tensor& output) {
    if (const auto* conv = module.as<torch::nn::Conv2dImpl>()) return convolution(name, *conv, value);
    if (const auto* linear = module.as<torch::nn::LinearImpl>()) {
      if (input.dim() > 2) {  // tokens [N, T, D]: Gemm takes matrices only
        const std::string product =
            graph_.add("MatMul",
                       {value, graph_.add("Transpose", {weight(name + ".weight", linear->weight)}, name + "/weight_t",
                                          {{"perm", std::vector<int64_t>{1, 0}}})},
                       linear->bias.defined() ? name + "/product" : name);
        if (!linear->bias.defined()) return product;
        return graph_.add("Add", {product, weight(name + ".bias", linear->bias)}, name);
      }
      std::vector<std::string> inputs{value, weight(name + ".weight", linear->weight)};
      if (linear->bias.defined()) inputs.push_back(weight(name + ".bias", linear->bias));
      return graph_.add("Gemm", inputs, name, {{"transB", int64_t{1}}});
    }
    if (const auto* norm = module.as<torch::nn::BatchNorm2dImpl>()) {
      return batchnorm(name, *norm, norm->options.eps(), value);
    }
    if (const auto* norm = module.as<torch::nn::BatchNorm1dImpl>()) {
      return batchnorm(name, *norm, norm->options.eps(), value);
    }
    if (const auto* norm = module.as<detail::SyncBatchNormImpl>()) {
      return batchnorm(name, *norm, norm->options().eps, value);
    }
    if (const auto* norm = module.as<torch::nn::LayerNormImpl>()) {
      // LayerNormalization normalises the axes from `axis` on: those of normalized_shape, the last ones.
      const auto axis = -static_cast<int64_t>(norm->options.normalized_shape().size());
      return graph_.add("LayerNormalization",
                        {value, weight(name + ".weight", norm->weight), weight(name + ".bias", norm->bias)}, name,
                        {{"axis", axis}, {"epsilon", static_cast<float>(norm->options.eps())}});
    }
    if (module.as<torch::nn::ReLUImpl>()) return graph_.add("Relu", {value}, name);
    if (module.as<torch::nn::TanhImpl>()) return graph_.add("Tanh", {value}, name);
    if (const auto* leaky = module.as<torch::nn::LeakyReLUImpl>()) {
      return graph_.add("LeakyRelu", {value}, name, {{"alpha", static_cast<float>(leaky->options.negative_slope())}});
    }
    if (module.as<torch::nn::SiLUImpl>()) {  // x * sigmoid(x)
      return graph_.add("Mul", {value, graph_.add("Sigmoid", {value}, name + "/sigmoid")}, name);
    }
    if (const auto* gelu = module.as<torch::nn::GELUImpl>()) {
      // Gelu is an operator from opset 20 only: x * (1 + erf(x / sqrt 2)) / 2, as torch computes it.
      if (gelu->options.approximate() != "none") {
        refuse(name, module,
               "only the exact (erf) GELU is written, not approximate='" + gelu->options.approximate() + "'");
      }
      const std::string erf =
          graph_.add("Erf", {graph_.add("Div", {value, scalar(static_cast<float>(std::sqrt(2.0)))}, name + "/scaled")},
                     name + "/erf");
      const std::string half =
          graph_.add("Mul", {graph_.add("Add", {erf, scalar(1.0f)}, name + "/plus_one"), scalar(0.5f)}, name + "/half");
      return graph_.add("Mul", {value, half}, name);
    }
    if (const auto* pool = module.as<torch::nn::MaxPool2dImpl>()) {
      const auto& o = pool->options;
      return graph_.add("MaxPool", {value}, name,
                        {{"kernel_shape", ints(o.kernel_size())},
                         {"strides", ints(o.stride())},
                         {"pads", both_ends(ints(o.padding()))},
                         {"dilations", ints(o.dilation())},
                         {"ceil_mode", int64_t{o.ceil_mode()}}});
    }
    if (const auto* pool = module.as<torch::nn::AvgPool2dImpl>()) {
      const auto& o = pool->options;
      if (o.divisor_override()) refuse(name, module, "ONNX's AveragePool has no divisor_override");
      return graph_.add("AveragePool", {value}, name,
                        {{"kernel_shape", ints(o.kernel_size())},
                         {"strides", ints(o.stride())},
                         {"pads", both_ends(ints(o.padding()))},
                         {"ceil_mode", int64_t{o.ceil_mode()}},
                         {"count_include_pad", int64_t{o.count_include_pad()}}});
    }
    if (module.as<torch::nn::AdaptiveAvgPool2dImpl>()) return adaptive_pool(name, module, value, input, output);
    if (const auto* flatten = module.as<torch::nn::FlattenImpl>()) {
      if (flatten->options.start_dim() != 1 || flatten->options.end_dim() != -1) {
        refuse(name, module, "ONNX's Flatten keeps the first axis only; this one keeps others");
      }
      return graph_.add("Flatten", {value}, name, {{"axis", int64_t{1}}});
    }
    if (module.as<torch::nn::DropoutImpl>()) return graph_.add("Identity", {value}, name);
    if (const auto* patches = module.as<detail::PatchEmbeddingImpl>()) return patch_embedding(name, *patches, value);
    if (const auto* hoisted = module.as<detail::HoistedTensorImpl>()) {
      // Its tensor is named as the list holding it registers it: by the layer's name.
      const std::string tensor = weight(name, hoisted->value);
      if (hoisted->kind == detail::HoistedTensorImpl::Kind::kPositionEmbedding) {
        return graph_.add("Add", {value, tensor}, name + "/added");  // `name` is the tensor's
      }
      // The token [1, 1, D] expanded to [batch, 1, D], put first.
      const std::string batch = graph_.add("Slice",
                                           {graph_.add("Shape", {value}, name + "/shape"),
                                            integers(name + "/zero", {1}, {0}), integers(name + "/one", {1}, {1})},
                                           name + "/batch");
      const std::string shape =
          graph_.add("Concat", {batch, integers(name + "/token_shape", {2}, {1, hoisted->value.size(2)})},
                     name + "/expanded_shape", {{"axis", int64_t{0}}});
      const std::string tokens = graph_.add("Expand", {tensor, shape}, name + "/expanded");
      return graph_.add("Concat", {tokens, value}, name + "/prepended", {{"axis", int64_t{1}}});
    }
    if (const auto* attention = module.as<detail::SelfAttentionImpl>()) return self_attention(name, *attention, value);
    if (const auto* token = module.as<detail::TokenImpl>()) {
      return graph_.add("Gather", {value, integers(name + "/index", {}, {token->index})}, name, {{"axis", int64_t{1}}});
    }
    refuse(name, module, "gputrain has no ONNX mapping for it");
  }

  // Conv, then [N, D, h, w] -> [N, h * w, D].
  std::string patch_embedding(const std::string& name, const detail::PatchEmbeddingImpl& patches,
                              const std::string& value) {
    std::vector<std::string> inputs{value, weight(name + ".weight", patches.weight)};
    if (patches.bias.defined()) inputs.push_back(weight(name + ".bias", patches.bias));
    const std::vector<int64_t> side{patches.patch, patches.patch};
    const std::string conv = graph_.add("Conv", inputs, name + "/conv", {{"kernel_shape", side}, {"strides", side}});
    const std::string flat =
        graph_.add("Reshape", {conv, integers(name + "/flat_shape", {3}, {0, patches.width, -1})}, name + "/flat");
    return graph_.add("Transpose", {flat}, name, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  }

  // x [N, T, D] -> softmax(q k^T / sqrt(d)) v per head, as at::scaled_dot_product_attention, then out_proj.
  std::string self_attention(const std::string& name, const detail::SelfAttentionImpl& attention,
                             const std::string& value) {
    const int64_t heads = attention.heads;
    const int64_t width = attention.width;
    std::string qkv =
        graph_.add("MatMul",
                   {value, graph_.add("Transpose", {weight(name + ".in_proj_weight", attention.in_proj_weight)},
                                      name + "/in_t", {{"perm", std::vector<int64_t>{1, 0}}})},
                   name + "/in");
    if (attention.in_proj_bias.defined()) {
      qkv = graph_.add("Add", {qkv, weight(name + ".in_proj_bias", attention.in_proj_bias)}, name + "/in_biased");
    }
    // [N, T, 3, heads, d] -> [3, N, heads, T, d]
    const std::string split =
        graph_.add("Transpose",
                   {graph_.add("Reshape", {qkv, integers(name + "/qkv_shape", {5}, {0, 0, 3, heads, width / heads})},
                               name + "/qkv")},
                   name + "/qkv_t", {{"perm", std::vector<int64_t>{2, 0, 3, 1, 4}}});
    const auto part = [&](int64_t index, const char* what) {
      return graph_.add("Gather", {split, integers(name + "/" + what + "_index", {}, {index})}, name + "/" + what,
                        {{"axis", int64_t{0}}});
    };
    const std::string q = part(0, "q");
    const std::string k = part(1, "k");
    const std::string v = part(2, "v");
    const std::string scores = graph_.add(
        "Mul",
        {graph_.add("MatMul",
                    {q, graph_.add("Transpose", {k}, name + "/k_t", {{"perm", std::vector<int64_t>{0, 1, 3, 2}}})},
                    name + "/qk"),
         scalar(static_cast<float>(1.0 / std::sqrt(static_cast<double>(width / heads))))},
        name + "/scores");
    const std::string weights = graph_.add("Softmax", {scores}, name + "/weights", {{"axis", int64_t{-1}}});
    const std::string attended =
        graph_.add("Reshape",
                   {graph_.add("Transpose", {graph_.add("MatMul", {weights, v}, name + "/attended")},
                               name + "/attended_t", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}),
                    integers(name + "/out_shape", {3}, {0, 0, width})},
                   name + "/joined");
    const auto& out = *attention.out_proj;
    std::string projected =
        graph_.add("MatMul",
                   {attended, graph_.add("Transpose", {weight(name + ".out_proj.weight", out.weight)}, name + "/out_t",
                                         {{"perm", std::vector<int64_t>{1, 0}}})},
                   out.bias.defined() ? name + "/out" : name);
    if (out.bias.defined()) projected = graph_.add("Add", {projected, weight(name + ".out_proj.bias", out.bias)}, name);
    return projected;
  }

  std::string integers(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> values) {
    return graph_.integers(name, std::move(dims), std::move(values));
  }

  std::string convolution(const std::string& name, const torch::nn::Conv2dImpl& conv, const std::string& value) {
    const auto& o = conv.options;
    const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
    if (padding == nullptr || !std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode())) {
      refuse(name, conv, "only numeric zero padding is written");
    }
    std::vector<std::string> inputs{value, weight(name + ".weight", conv.weight)};
    if (conv.bias.defined()) inputs.push_back(weight(name + ".bias", conv.bias));
    return graph_.add("Conv", inputs, name,
                      {{"kernel_shape", ints(o.kernel_size())},
                       {"strides", ints(o.stride())},
                       {"pads", both_ends(ints(*padding))},
                       {"dilations", ints(o.dilation())},
                       {"group", o.groups()}});
  }

  // Eval form: the running statistics. Parameters and buffers are named as torch's BatchNorm's.
  template <class Norm>
  std::string batchnorm(const std::string& name, const Norm& norm, double eps, const std::string& value) {
    GPUTRAIN_CHECK(norm.weight.defined() && norm.running_mean.defined(),
                   "{}: a batchnorm without affine weights or running statistics", name);
    return graph_.add(
        "BatchNormalization",
        {value, weight(name + ".weight", norm.weight), weight(name + ".bias", norm.bias),
         weight(name + ".running_mean", norm.running_mean), weight(name + ".running_var", norm.running_var)},
        name, {{"epsilon", static_cast<float>(eps)}});
  }

  // ONNX has no adaptive pooling; where each output cell averages an equal
  // window (the input's side a multiple of the output's), it is an
  // AveragePool whose kernel and stride are the ratio of the sides.
  std::string adaptive_pool(const std::string& name, const torch::nn::Module& module, const std::string& value,
                            const torch::Tensor& input, const torch::Tensor& output) {
    std::vector<int64_t> window;
    for (const int64_t axis : {2, 3}) {
      if (input.size(axis) % output.size(axis) != 0) {
        refuse(name, module,
               fmt::format("its {}x{} input does not divide into {}x{} equal windows, which is what ONNX's "
                           "AveragePool can express; choose an output_size that divides the input's side",
                           input.size(2), input.size(3), output.size(2), output.size(3)));
      }
      window.push_back(input.size(axis) / output.size(axis));
    }
    return graph_.add("AveragePool", {value}, name, {{"kernel_shape", window}, {"strides", window}});
  }

  [[noreturn]] static void refuse(const std::string& name, const torch::nn::Module& module, const std::string& why) {
    throw UserError(
        fmt::format("layer {} ({}) cannot be written as ONNX: {}. The state_dict export (without "
                    "--format onnx) writes any model",
                    name, detail::pretty(module), why));
  }

  std::string weight(std::string name, const torch::Tensor& tensor) {
    const torch::Tensor values = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const float* data = values.data_ptr<float>();
    return graph_.constant(std::move(name), values.sizes().vec(), {data, data + values.numel()});
  }

  // A float32 scalar, made once per value.
  const std::string& scalar(float value) {
    auto [at, added] = scalars_.try_emplace(value);
    if (added) at->second = graph_.constant(fmt::format("constant_{}", value), {}, {value});
    return at->second;
  }

  onnx::Graph& graph_;
  std::map<float, std::string> scalars_;
};

}  // namespace

OnnxOutput add_onnx_layers(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape, onnx::Graph& graph,
                           const std::string& input) {
  OnnxOutput output;
  detail::trace_zero_sample(model, sample_shape, [&](torch::Tensor& x) {
    output.value = OnnxLayers(graph).add(model, "", input, x);
    output.width = x.size(-1);
  });
  return output;
}

}  // namespace gputrain::exporting
