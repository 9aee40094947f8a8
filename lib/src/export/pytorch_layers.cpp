#include "gputrain/export/pytorch_layers.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>

#include "gputrain/common/error.h"
#include "layers.h"
#include "residual.h"
#include "sync_batchnorm.h"
#include "tokens.h"

namespace gputrain::exporting {

namespace detail = models::detail;

namespace {

const char* const kPythonTokens = R"(class PatchEmbedding(nn.Conv2d):
    """gputrain's patch_embedding: a patch x patch convolution of stride patch, its positions as tokens [N, h*w, D]."""

    def forward(self, x):
        return super().forward(x).flatten(2).transpose(1, 2)


class Hoisted(nn.Module):
    """gputrain's class_token (put first) and position_embedding (added): one learned tensor, which
    the Layers holding it registers under the layer's name."""

    only_its_tensor = True

    def __init__(self, key, shape, first):
        super().__init__()
        self.__dict__["tensor"] = nn.Parameter(torch.zeros(shape))
        self.key, self.first = key, first

    def hoisted_parameters(self):
        return [(self.key, self.tensor)]

    def forward(self, x):
        if self.first:
            return torch.cat([self.tensor.expand(x.shape[0], -1, -1), x], dim=1)
        return x + self.tensor


class SelfAttention(nn.MultiheadAttention):
    """gputrain's self_attention over tokens [N, T, D]: torch's multi-head attention of the tokens with themselves."""

    def __init__(self, width, heads, dropout, bias):
        super().__init__(width, heads, dropout=dropout, bias=bias, batch_first=True)

    def forward(self, x):
        return super().forward(x, x, x, need_weights=False)[0]


class Token(nn.Module):
    """gputrain's token: the token at `index` of [N, T, D] tokens."""

    def __init__(self, index):
        super().__init__()
        self.index = index

    def forward(self, x):
        return x[:, self.index]
)";

}  // namespace

const char* const kPythonResidual = R"(class Residual(nn.Module):
    """gputrain's residual layer: its layers' output plus its input, or plus its shortcut's output.
    Inline, its branches are not registered here: the Layers holding it registers their modules."""

    def __init__(self, layers, shortcut=None, inline=False):
        super().__init__()
        if inline:
            self.__dict__["layers"], self.__dict__["shortcut"] = layers, shortcut
        else:
            self.layers = layers
            self.shortcut = shortcut
        self.inline = inline

    def hoisted_modules(self):
        branches = [b for b in (self.layers, self.shortcut) if b is not None] if self.inline else []
        return [item for branch in branches for item in branch._modules.items()]

    def hoisted_parameters(self):
        branches = [b for b in (self.layers, self.shortcut) if b is not None] if self.inline else []
        return [item for branch in branches for item in branch._parameters.items()]

    def forward(self, x):
        return self.layers(x) + (x if self.shortcut is None else self.shortcut(x))
)";

const char* const kPythonLayers = R"(class Layers(nn.Module):
    """gputrain's list of layers, run in order, where what a layer hoists (an inline residual's
    modules) is registered under its own name, as gputrain's state dict names it."""

    def __init__(self, layers):
        super().__init__()
        self.__dict__["steps"] = list(layers.values())
        for name, layer in layers.items():
            if not getattr(layer, "only_its_tensor", False):  # a Hoisted layer: its tensor goes by its name
                self.add_module(name, layer)
        for layer in self.steps:
            for name, module in getattr(layer, "hoisted_modules", list)():
                self.add_module(name, module)
            for name, parameter in getattr(layer, "hoisted_parameters", list)():
                self.register_parameter(name, parameter)

    def forward(self, x):
        for layer in self.steps:
            x = layer(x)
        return x
)";

namespace {

std::string boolean(bool value) { return value ? "True" : "False"; }

// fmt's shortest form reads back as the same double, and is a Python literal ("1e-05").
std::string number(double value) { return fmt::format("{}", value); }

template <std::size_t D>
std::string tuple(const torch::ExpandingArray<D>& array) {
  return fmt::format("({})", fmt::join(*array, ", "));
}

template <class Norm>
std::string batchnorm(const char* type, const Norm& norm) {
  const auto& o = norm.options;
  return fmt::format("nn.{}({}, eps={}, momentum={}, affine={}, track_running_stats={})", type, o.num_features(),
                     number(o.eps()), o.momentum() ? number(*o.momentum()) : "None", boolean(o.affine()),
                     boolean(o.track_running_stats()));
}

// One layer that is not a residual, as the torch.nn constructor call that builds its equal.
std::string layer(const std::string& name, const torch::nn::Module& module) {
  if (const auto* conv = module.as<torch::nn::Conv2dImpl>()) {
    const auto& o = conv->options;
    const auto* padding = std::get_if<torch::ExpandingArray<2>>(&o.padding());
    GPUTRAIN_CHECK(padding != nullptr && std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()),
                   "{}: gputrain builds convolutions with numeric zero padding only", name);
    return fmt::format("nn.Conv2d({}, {}, kernel_size={}, stride={}, padding={}, dilation={}, groups={}, bias={})",
                       o.in_channels(), o.out_channels(), tuple(o.kernel_size()), tuple(o.stride()), tuple(*padding),
                       tuple(o.dilation()), o.groups(), boolean(o.bias()));
  }
  if (const auto* linear = module.as<torch::nn::LinearImpl>()) {
    const auto& o = linear->options;
    return fmt::format("nn.Linear({}, {}, bias={})", o.in_features(), o.out_features(), boolean(o.bias()));
  }
  if (const auto* norm = module.as<torch::nn::BatchNorm2dImpl>()) return batchnorm("BatchNorm2d", *norm);
  if (const auto* norm = module.as<torch::nn::BatchNorm1dImpl>()) return batchnorm("BatchNorm1d", *norm);
  if (const auto* norm = module.as<detail::SyncBatchNormImpl>()) {  // torch's batchnorm outside ddp: the same keys
    const auto& o = norm->options();
    return fmt::format("nn.{}({}, eps={}, momentum={})", o.images ? "BatchNorm2d" : "BatchNorm1d", o.features,
                       number(o.eps), number(o.momentum));
  }
  if (const auto* norm = module.as<torch::nn::LayerNormImpl>()) {
    const auto& o = norm->options;
    return fmt::format("nn.LayerNorm([{}], eps={}, elementwise_affine={})", fmt::join(o.normalized_shape(), ", "),
                       number(o.eps()), boolean(o.elementwise_affine()));
  }
  if (module.as<torch::nn::ReLUImpl>()) return "nn.ReLU()";
  if (module.as<torch::nn::TanhImpl>()) return "nn.Tanh()";
  if (module.as<torch::nn::SiLUImpl>()) return "nn.SiLU()";
  if (const auto* leaky = module.as<torch::nn::LeakyReLUImpl>()) {
    return fmt::format("nn.LeakyReLU(negative_slope={})", number(leaky->options.negative_slope()));
  }
  if (const auto* gelu = module.as<torch::nn::GELUImpl>()) {
    return fmt::format("nn.GELU(approximate='{}')", gelu->options.approximate());
  }
  if (const auto* pool = module.as<torch::nn::MaxPool2dImpl>()) {
    const auto& o = pool->options;
    return fmt::format("nn.MaxPool2d(kernel_size={}, stride={}, padding={}, dilation={}, ceil_mode={})",
                       tuple(o.kernel_size()), tuple(o.stride()), tuple(o.padding()), tuple(o.dilation()),
                       boolean(o.ceil_mode()));
  }
  if (const auto* pool = module.as<torch::nn::AvgPool2dImpl>()) {
    const auto& o = pool->options;
    return fmt::format(
        "nn.AvgPool2d(kernel_size={}, stride={}, padding={}, ceil_mode={}, count_include_pad={}, "
        "divisor_override={})",
        tuple(o.kernel_size()), tuple(o.stride()), tuple(o.padding()), boolean(o.ceil_mode()),
        boolean(o.count_include_pad()), o.divisor_override() ? std::to_string(*o.divisor_override()) : "None");
  }
  if (const auto* pool = module.as<torch::nn::AdaptiveAvgPool2dImpl>()) {
    std::vector<std::string> sides;
    for (const auto& side : *pool->options.output_size()) sides.push_back(side ? std::to_string(*side) : "None");
    return fmt::format("nn.AdaptiveAvgPool2d(({}))", fmt::join(sides, ", "));
  }
  if (const auto* flatten = module.as<torch::nn::FlattenImpl>()) {
    const auto& o = flatten->options;
    return fmt::format("nn.Flatten(start_dim={}, end_dim={})", o.start_dim(), o.end_dim());
  }
  if (const auto* dropout = module.as<torch::nn::DropoutImpl>()) {
    return fmt::format("nn.Dropout(p={})", number(dropout->options.p()));
  }
  if (const auto* patches = module.as<detail::PatchEmbeddingImpl>()) {
    return fmt::format("PatchEmbedding({}, {}, kernel_size={}, stride={}, bias={})", patches->channels, patches->width,
                       patches->patch, patches->patch, boolean(patches->with_bias));
  }
  if (const auto* hoisted = module.as<detail::HoistedTensorImpl>()) {
    return fmt::format("Hoisted(\"{}\", ({},), first={})", hoisted->name, fmt::join(hoisted->value.sizes(), ", "),
                       boolean(hoisted->kind == detail::HoistedTensorImpl::Kind::kClassToken));
  }
  if (const auto* attention = module.as<detail::SelfAttentionImpl>()) {
    return fmt::format("SelfAttention({}, {}, dropout={}, bias={})", attention->width, attention->heads,
                       number(attention->dropout), boolean(attention->with_bias));
  }
  if (const auto* token = module.as<detail::TokenImpl>()) return fmt::format("Token({})", token->index);
  GPUTRAIN_CHECK(false, "layer {} ({}) has no PyTorch mapping", name, detail::pretty(module));
}

std::string list(const torch::nn::Sequential& layers, const std::string& prefix, int indent);

// The list opens on a line at column `indent`; its entries are 4 spaces further in.
std::string layers_of(const torch::nn::Sequential& layers, const std::string& prefix, int indent) {
  const std::string inner(indent + 4, ' ');
  std::string source = "OrderedDict([\n";
  for (const auto& [key, child] : detail::named_layers(layers)) {
    const std::string name = prefix + key;
    std::string module;
    if (const auto* residual = child->as<detail::ResidualImpl>()) {
      // An inline residual's layers are named in the list holding it.
      const std::string layers_prefix = residual->is_inline ? prefix : name + ".layers.";
      const std::string shortcut_prefix = residual->is_inline ? prefix : name + ".shortcut.";
      module = fmt::format("Residual({}", list(residual->layers, layers_prefix, indent + 4));
      if (!residual->shortcut.is_empty()) {
        module += fmt::format(", {}", list(residual->shortcut, shortcut_prefix, indent + 4));
      } else if (residual->is_inline) {
        module += ", None";
      }
      module += residual->is_inline ? ", inline=True)" : ")";
    } else if (child->as<torch::nn::SequentialImpl>()) {
      module = list(torch::nn::Sequential(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(child)), name + ".",
                    indent + 4);
    } else {
      module = layer(name, *child);
    }
    source += fmt::format("{}(\"{}\", {}),\n", inner, key, module);
  }
  return source + std::string(indent, ' ') + "])";
}

// A nested list: a Layers where a layer hoists, else a torch.nn.Sequential.
std::string list(const torch::nn::Sequential& layers, const std::string& prefix, int indent) {
  return fmt::format("{}({})", pytorch_hoists(layers) ? "Layers" : "nn.Sequential", layers_of(layers, prefix, indent));
}

}  // namespace

std::string pytorch_layers(const torch::nn::Sequential& model, int indent) { return layers_of(model, "", indent); }

std::string pytorch_classes(const torch::nn::Sequential& model, const std::string& layers) {
  std::string source;
  if (layers.find("Residual(") != std::string::npos) source += fmt::format("\n{}\n", kPythonResidual);
  if (pytorch_hoists(model) || layers.find("Layers(") != std::string::npos) {
    source += fmt::format("\n{}\n", kPythonLayers);
  }
  for (const char* used : {"PatchEmbedding(", "Hoisted(", "SelfAttention(", "Token("}) {
    if (layers.find(used) != std::string::npos) return source + fmt::format("\n{}\n", kPythonTokens);
  }
  return source;
}

bool pytorch_hoists(const torch::nn::Sequential& layers) {
  for (const auto& [key, child] : detail::named_layers(layers)) {
    if (const auto* hoisting = dynamic_cast<const detail::Hoisting*>(child.get())) {
      if (!hoisting->hoisted_modules().empty() || !hoisting->hoisted_parameters().empty()) return true;
    }
  }
  return false;
}

}  // namespace gputrain::exporting
