// model.layers: the network the config declares, its shapes inferred from
// the data set's sample shape, each mismatch blamed on the layer that has it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include <functional>
#include <map>
#include <new>
#include <numeric>
#include <set>

#include "gputrain/common/error.h"
#include "gputrain/config/layer_keys.h"
#include "layers.h"
#include "residual.h"
#include "sync_batchnorm.h"
#include "tokens.h"

namespace gputrain::models::detail {

namespace {

using config::LayerConfig;
using config::LayerType;
using Shape = std::vector<int64_t>;  // one sample's

std::string shape_text(const Shape& shape) {
  const int64_t values = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  if (shape.size() == 1) return fmt::format("{} features", values);
  if (shape.size() == 3) return fmt::format("{}x{}x{} images (CxHxW)", shape[0], shape[1], shape[2]);
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The side of a window's output: how many windows of `kernel` fit at `stride` in `side` padded by `padding`.
int64_t windows(int64_t side, int64_t kernel, int64_t stride, int64_t padding) {
  return (side + 2 * padding - kernel) / stride + 1;
}

class DeclaredNetwork {
 public:
  // How a list names the layers that have no `name`.
  enum class Naming {
    kCounted,  // the type's prefix and a count across the network: conv1, bn1, conv2, ...
    kIndexed,  // the index in the list, as torch.nn.Sequential: 0, 1, ...
  };

  DeclaredNetwork(int64_t outputs, bool sync_batchnorm) : outputs_(outputs), sync_batchnorm_(sync_batchnorm) {}

  // The layers of one list, `shape` updated to what the last gives. `last`:
  // the list ends the network, so its last linear may leave out out_features.
  // `names`: those taken in the list's namespace, which an inline residual's
  // layers share with the list holding it.
  torch::nn::Sequential build(const std::vector<LayerConfig>& layers, Shape& shape, bool ends_network, Naming naming,
                              std::set<std::string>& names) {
    torch::nn::Sequential sequential = named_sequential();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const LayerConfig& layer = layers[i];
      const bool last = ends_network && i + 1 == layers.size();
      torch::nn::AnyModule module;
      try {
        module = make(layer, shape, last, made_++ == 0, names);
      } catch (const c10::Error& e) {  // LibTorch refusing the weights: a size past what it can count or allocate
        fail(layer,
             fmt::format("LibTorch cannot make its weights ({}); make the layer smaller", e.what_without_backtrace()));
      } catch (const std::bad_alloc&) {
        fail(layer, "its weights do not fit in memory; make the layer smaller");
      }
      // Named after its nested layers, as the counts have always gone (res2 holding res1).
      const std::string name = !layer.name.empty()          ? layer.name
                               : naming == Naming::kIndexed ? std::to_string(i)
                                                            : default_name(layer, names);
      if (!names.insert(name).second) {
        fail(layer, fmt::format("the name '{}' is taken by an earlier layer of this list; layer names are "
                                "checkpoint keys and must differ",
                                name));
      }
      // Its one tensor goes by the layer's name in this list.
      if (auto* hoisted = module.ptr()->as<HoistedTensorImpl>()) hoisted->name = name;
      add_layer(sequential, name, std::move(module));
    }
    return sequential;
  }

 private:
  [[noreturn]] static void fail(const LayerConfig& layer, const std::string& problem) {
    throw ConfigError(layer.mark, fmt::format("{} ({})", layer.path, config::word(layer.type)), problem);
  }

  std::string default_name(const LayerConfig& layer, const std::set<std::string>& taken) {
    const std::string prefix = config::layer_type_info(layer.type).prefix;
    std::string name;
    do {
      name = prefix + std::to_string(++counts_[prefix]);
    } while (taken.count(name));
    return name;
  }

  static void require_images(const LayerConfig& layer, const Shape& shape) {
    if (shape.size() != 3) {
      fail(layer, fmt::format("needs images (CxHxW) but gets {}; it belongs before the flatten", shape_text(shape)));
    }
  }

  static void require_tokens(const LayerConfig& layer, const Shape& shape) {
    if (shape.size() != 2) {
      fail(layer,
           fmt::format("needs tokens [T, D] but gets {}; a patch_embedding makes tokens of images", shape_text(shape)));
    }
  }

  // A window's output side, or an error when the window does not fit.
  static int64_t window_side(const LayerConfig& layer, int64_t side, int64_t kernel, int64_t stride, int64_t padding) {
    if (side + 2 * padding < kernel) {
      fail(layer, fmt::format("kernel {} does not fit its {}x{} input padded by {}", kernel, side, side, padding));
    }
    return windows(side, kernel, stride, padding);
  }

  // `first`: the network's first layer, which sees the data set's samples.
  // `names`: those taken in the list it goes into.
  torch::nn::AnyModule make(const LayerConfig& layer, Shape& shape, bool last, bool first,
                            std::set<std::string>& names) {
    using config::layer_integer;
    switch (layer.type) {
      case LayerType::kConv2d: {
        require_images(layer, shape);
        const int64_t out = layer_integer(layer, "out_channels");
        const int64_t kernel = layer_integer(layer, "kernel");
        const int64_t stride = layer_integer(layer, "stride");
        const int64_t padding = layer_integer(layer, "padding");
        const int64_t groups = layer_integer(layer, "groups");
        if (shape[0] % groups != 0 || out % groups != 0) {
          fail(layer, fmt::format("groups {} must divide its input channels ({}) and out_channels ({})", groups,
                                  shape[0], out));
        }
        if (layer_integer(layer, "whiten") > 0) check_whitening(layer, shape, out, kernel, groups, first);
        check_whiten_bias_epochs(layer);
        auto options = torch::nn::Conv2dOptions(shape[0], out, kernel)
                           .stride(stride)
                           .padding(padding)
                           .groups(groups)
                           .bias(layer_integer(layer, "bias") != 0);
        shape = {out, window_side(layer, shape[1], kernel, stride, padding),
                 window_side(layer, shape[2], kernel, stride, padding)};
        torch::nn::Conv2d conv(options);
        // Its values come from the training images (whiten_first_conv); they do not train.
        if (layer_integer(layer, "whiten") > 0) conv->weight.set_requires_grad(false);
        return torch::nn::AnyModule(conv);
      }
      case LayerType::kBatchnorm: {
        const double momentum = *config::layer_value(layer, "momentum");
        const double eps = *config::layer_value(layer, "eps");
        if (sync_batchnorm_ && shape.size() <= 3) {
          SyncBatchNorm norm(SyncBatchNormOptions{shape[0], momentum, eps, shape.size() == 3});
          set_scale(layer, norm->weight);
          return torch::nn::AnyModule(norm);
        }
        if (shape.size() == 3) {
          torch::nn::BatchNorm2d norm(torch::nn::BatchNorm2dOptions(shape[0]).momentum(momentum).eps(eps));
          set_scale(layer, norm->weight);
          return torch::nn::AnyModule(norm);
        }
        if (shape.size() == 1 || shape.size() == 2) {
          torch::nn::BatchNorm1d norm(torch::nn::BatchNorm1dOptions(shape[0]).momentum(momentum).eps(eps));
          set_scale(layer, norm->weight);
          return torch::nn::AnyModule(norm);
        }
        fail(layer, fmt::format("normalises images (CxHxW) or features, not {}", shape_text(shape)));
      }
      case LayerType::kLayernorm: {
        const Shape normalized = layer_integer(layer, "last_dim") != 0 ? Shape{shape.back()} : shape;
        return torch::nn::AnyModule(
            torch::nn::LayerNorm(torch::nn::LayerNormOptions(normalized).eps(*config::layer_value(layer, "eps"))));
      }
      case LayerType::kPatchEmbedding: {
        require_images(layer, shape);
        const int64_t patch = layer_integer(layer, "patch");
        const int64_t width = layer_integer(layer, "width");
        if (shape[1] % patch != 0 || shape[2] % patch != 0) {
          fail(layer, fmt::format("its {}x{} images do not divide into {}x{} patches; choose a patch that divides "
                                  "both sides, or resize the images (data.image_size, data.center_crop)",
                                  shape[1], shape[2], patch, patch));
        }
        const int64_t channels = shape[0];
        shape = {(shape[1] / patch) * (shape[2] / patch), width};
        return torch::nn::AnyModule(PatchEmbedding(channels, width, patch, layer_integer(layer, "bias") != 0));
      }
      case LayerType::kClassToken: {
        require_tokens(layer, shape);
        torch::Tensor token = torch::zeros({1, 1, shape[1]});  // torchvision's: zeros
        shape[0] += 1;
        return torch::nn::AnyModule(HoistedTensor(HoistedTensorImpl::Kind::kClassToken, "", token));
      }
      case LayerType::kPositionEmbedding: {
        require_tokens(layer, shape);
        torch::Tensor embedding = torch::randn({1, shape[0], shape[1]}) * *config::layer_value(layer, "std");
        return torch::nn::AnyModule(HoistedTensor(HoistedTensorImpl::Kind::kPositionEmbedding, "", embedding));
      }
      case LayerType::kSelfAttention: {
        require_tokens(layer, shape);
        const int64_t heads = layer_integer(layer, "heads");
        if (shape[1] % heads != 0) {
          fail(layer, fmt::format("{} heads do not divide its tokens' width {}; choose heads that divide it", heads,
                                  shape[1]));
        }
        return torch::nn::AnyModule(
            SelfAttention(shape[1], heads, *config::layer_value(layer, "dropout"), layer_integer(layer, "bias") != 0));
      }
      case LayerType::kToken: {
        require_tokens(layer, shape);
        const int64_t index = layer_integer(layer, "index");
        if (index >= shape[0]) fail(layer, fmt::format("index {} is past its {} tokens", index, shape[0]));
        shape = {shape[1]};
        return torch::nn::AnyModule(Token(index));
      }
      case LayerType::kRelu:
        return torch::nn::AnyModule(torch::nn::ReLU());
      case LayerType::kGelu:
        return torch::nn::AnyModule(torch::nn::GELU());
      case LayerType::kSilu:
        return torch::nn::AnyModule(torch::nn::SiLU());
      case LayerType::kTanh:
        return torch::nn::AnyModule(torch::nn::Tanh());
      case LayerType::kLeakyRelu:
        return torch::nn::AnyModule(torch::nn::LeakyReLU(
            torch::nn::LeakyReLUOptions().negative_slope(*config::layer_value(layer, "negative_slope"))));
      case LayerType::kMaxpool:
      case LayerType::kAvgpool: {
        require_images(layer, shape);
        const int64_t kernel = layer_integer(layer, "kernel");
        const int64_t stride = config::layer_value(layer, "stride") ? layer_integer(layer, "stride") : kernel;
        const int64_t padding = layer_integer(layer, "padding");
        if (2 * padding > kernel) {
          fail(layer, fmt::format("padding {} is more than half its kernel ({})", padding, kernel));
        }
        shape = {shape[0], window_side(layer, shape[1], kernel, stride, padding),
                 window_side(layer, shape[2], kernel, stride, padding)};
        if (layer.type == LayerType::kMaxpool) {
          return torch::nn::AnyModule(
              torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(kernel).stride(stride).padding(padding)));
        }
        return torch::nn::AnyModule(
            torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(kernel).stride(stride).padding(padding)));
      }
      case LayerType::kAdaptiveAvgpool: {
        require_images(layer, shape);
        const int64_t side = layer_integer(layer, "output_size");
        shape = {shape[0], side, side};
        return torch::nn::AnyModule(torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(side)));
      }
      case LayerType::kFlatten:
        shape = {std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>())};
        return torch::nn::AnyModule(torch::nn::Flatten());
      case LayerType::kLinear: {
        if (shape.size() >= 3) {
          fail(layer,
               fmt::format("gets {}; put {{type: flatten}} before it to make them {} features", shape_text(shape),
                           std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>())));
        }
        int64_t out = outputs_;
        if (config::layer_value(layer, "out_features")) {
          out = layer_integer(layer, "out_features");
        } else if (!last) {
          fail(layer,
               "needs out_features; only the network's last layer may leave it out (it then gives the data "
               "set's classes or targets)");
        }
        const int64_t in = shape.back();
        shape.back() = out;
        return torch::nn::AnyModule(
            torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(layer_integer(layer, "bias") != 0)));
      }
      case LayerType::kDropout:
        return torch::nn::AnyModule(torch::nn::Dropout(*config::layer_value(layer, "p")));
      case LayerType::kSequential: {
        std::set<std::string> own;
        torch::nn::Sequential list = build(layer.layers, shape, last, Naming::kIndexed, own);
        return torch::nn::AnyModule(std::dynamic_pointer_cast<NamedSequentialImpl>(list.ptr()));
      }
      case LayerType::kResidual: {
        // Inline: the branches' layers join the enclosing list's names.
        const bool inline_ = layer_integer(layer, "inline") != 0;
        std::set<std::string> branch_names;
        std::set<std::string> shortcut_names;
        Shape branch_shape = shape;
        torch::nn::Sequential branch =
            build(layer.layers, branch_shape, false, Naming::kCounted, inline_ ? names : branch_names);
        Shape shortcut_shape = shape;
        torch::nn::Sequential shortcut(nullptr);
        if (!layer.shortcut.empty()) {
          shortcut = build(layer.shortcut, shortcut_shape, false, Naming::kCounted, inline_ ? names : shortcut_names);
        }
        if (branch_shape != shortcut_shape) {
          if (layer.shortcut.empty()) {
            fail(layer, fmt::format("its layers give {} but its input is {}; they are added, so add a `shortcut` "
                                    "list that gives the same shape (e.g. a conv2d with kernel 1)",
                                    shape_text(branch_shape), shape_text(shape)));
          }
          fail(layer, fmt::format("its layers give {} but its shortcut gives {}; they are added, so they must agree",
                                  shape_text(branch_shape), shape_text(shortcut_shape)));
        }
        shape = branch_shape;
        return torch::nn::AnyModule(Residual(branch, shortcut, inline_));
      }
    }
    config::unhandled(layer.type);
  }

  // A batchnorm's scale at `weight`, trained unless train_weight is false.
  static void set_scale(const LayerConfig& layer, torch::Tensor& weight) {
    torch::NoGradGuard no_grad;
    weight.fill_(*config::layer_value(layer, "weight"));
    weight.set_requires_grad(config::layer_integer(layer, "train_weight") != 0);
  }

  // `whiten` makes 2 filters per dimension of a patch (C × kernel²) from the images the network is given.
  static void check_whitening(const LayerConfig& layer, const Shape& shape, int64_t out, int64_t kernel, int64_t groups,
                              bool first) {
    if (!first) {
      fail(layer, "whitens the training images' patches, so it must be the network's first layer");
    }
    if (groups != 1 || out != 2 * shape[0] * kernel * kernel) {
      fail(layer,
           fmt::format("whitening makes 2 × {} channels × {}² = {} filters with groups 1; set out_channels: "
                       "{} and groups: 1 (got {} and {})",
                       shape[0], kernel, 2 * shape[0] * kernel * kernel, 2 * shape[0] * kernel * kernel, out, groups));
    }
  }

  // whiten_bias_epochs freezes the whitening convolution's bias: on any other
  // layer it would do nothing, which a user would not see.
  static void check_whiten_bias_epochs(const LayerConfig& layer) {
    using config::layer_integer;
    const int64_t epochs = layer_integer(layer, "whiten_bias_epochs");
    if (epochs == 0) return;
    if (layer_integer(layer, "whiten") == 0) {
      fail(layer, fmt::format("whiten_bias_epochs: {} freezes the bias of a whitening convolution, and this layer "
                              "does not whiten; set whiten: N (the training images to whiten from) or leave "
                              "whiten_bias_epochs out",
                              epochs));
    }
    if (layer_integer(layer, "bias") == 0) {
      fail(layer, fmt::format("whiten_bias_epochs: {} freezes this layer's bias, and it has bias: false; set "
                              "bias: true or leave whiten_bias_epochs out",
                              epochs));
    }
  }

  int64_t outputs_;
  bool sync_batchnorm_;
  int64_t made_ = 0;                   // layers made so far, in nested lists too
  std::map<std::string, int> counts_;  // per default-name prefix, across nested lists
};

}  // namespace

torch::nn::Sequential make_declared(const config::ModelConfig& config, const ModelShape& shape) {
  checked_inputs(config, shape);  // only to check model.in_features
  const int64_t wanted = outputs(config, shape);
  DeclaredNetwork network(wanted, config.sync_batchnorm);
  Shape sample = shape.input_shape;
  std::set<std::string> names;
  torch::nn::Sequential model = network.build(config.layers, sample, true, DeclaredNetwork::Naming::kCounted, names);
  if (sample != Shape{wanted}) {
    const LayerConfig& last = config.layers.back();
    throw ConfigError(last.mark, fmt::format("{} ({})", last.path, config::word(last.type)),
                      fmt::format("the network ends with {} per sample, but the data set needs {} outputs (its "
                                  "classes or targets); end with a linear layer (out_features may be left out)",
                                  shape_text(sample), wanted));
  }
  return model;
}

}  // namespace gputrain::models::detail
