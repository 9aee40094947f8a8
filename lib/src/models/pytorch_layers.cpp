#include "gputrain/models/pytorch_layers.h"

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

namespace gputrain::models {

const char* const kPythonResidual = R"(class Residual(nn.Module):
    """gputrain's residual layer: its layers' output plus its input, or plus its shortcut's output."""

    def __init__(self, layers, shortcut=None):
        super().__init__()
        self.layers = layers
        self.shortcut = shortcut

    def forward(self, x):
        return self.layers(x) + (x if self.shortcut is None else self.shortcut(x))
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
  GPUTRAIN_CHECK(false, "layer {} ({}) has no PyTorch mapping", name, detail::pretty(module));
}

// The list opens on a line at column `indent`; its entries are 4 spaces further in.
std::string layers_of(const torch::nn::Sequential& layers, const std::string& prefix, int indent) {
  const std::string inner(indent + 4, ' ');
  std::string source = "OrderedDict([\n";
  for (const auto& child : layers->named_children()) {
    const std::string name = prefix + child.key();
    std::string module;
    if (const auto* residual = child.value()->as<detail::ResidualImpl>()) {
      module = fmt::format("Residual(nn.Sequential({})", layers_of(residual->layers, name + ".layers.", indent + 4));
      if (!residual->shortcut.is_empty()) {
        module += fmt::format(", nn.Sequential({})", layers_of(residual->shortcut, name + ".shortcut.", indent + 4));
      }
      module += ")";
    } else {
      module = layer(name, *child.value());
    }
    source += fmt::format("{}(\"{}\", {}),\n", inner, child.key(), module);
  }
  return source + std::string(indent, ' ') + "])";
}

}  // namespace

std::string pytorch_layers(const torch::nn::Sequential& model, int indent) { return layers_of(model, "", indent); }

}  // namespace gputrain::models
