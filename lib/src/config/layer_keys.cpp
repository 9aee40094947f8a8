#include "gputrain/config/layer_keys.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace gputrain::config {

namespace {
constexpr auto kInt = LayerValueKind::kInteger;
constexpr auto kReal = LayerValueKind::kReal;
constexpr auto kBool = LayerValueKind::kBoolean;
constexpr Range kAnyBool{0, 1, false, false};

const std::vector<LayerTypeInfo>& layer_types() {
  const std::vector<LayerKey> pool_keys{
      {"kernel", kInt, Range{1}, 2, false, "square window side"},
      {"stride", kInt, Range{1}, std::nullopt, false, "step between windows; default: the kernel"},
      {"padding", kInt, Range{0}, 0, false, "padding on each side; at most half the kernel"}};
  static const std::vector<LayerTypeInfo> kTypes{
      {LayerType::kConv2d,
       "conv",
       {{"out_channels", kInt, Range{1}, std::nullopt, true, "output channels"},
        {"kernel", kInt, Range{1}, std::nullopt, true, "square kernel side"},
        {"stride", kInt, Range{1}, 1, false, "step between windows"},
        {"padding", kInt, Range{0}, 0, false, "zeros added on each side"},
        {"groups", kInt, Range{1}, 1, false, "channel groups; must divide input and output channels"},
        {"bias", kBool, kAnyBool, 1, false, "add a learned bias (false before a batchnorm)"},
        {"whiten", kInt, Range{0}, 0, false,
         "> 0: the weights are fixed (not trained) at the whitening of the patches of the first this many "
         "training images, normalised as the loader does (airbench's init_whiten): the patch covariance's "
         "eigenvectors / sqrt(eigenvalue + `whiten_eps`), and their negatives. The network's first layer only, "
         "with out_channels = 2 × input channels × kernel², groups 1; the bias (if any) trains"},
        {"whiten_eps", kReal, above(0), 5e-4, false, "`whiten`: added to each eigenvalue"},
        {"whiten_bias_epochs", kInt, Range{0}, 0, false,
         "`whiten`: > 0: the bias trains for this many first epochs only, then stays as it is (its group's lr is 0 "
         "from then on, so momentum and weight decay cannot move it either, also in `train.cuda_graph`; "
         "airbench94_muon: 3; `optim.lookahead`'s next sync still moves it once, toward its slow weights); 0: "
         "it trains throughout. An error without `whiten` or with `bias: false`"}},
       "2-D convolution of CxHxW samples"},
      {LayerType::kBatchnorm,
       "bn",
       {{"momentum", kReal, Range{0, 1, false, false}, 0.1, false, "running statistics' update weight"},
        {"eps", kReal, above(0), 1e-5, false, "added to the variance"},
        {"weight", kReal, Range{-1e6, 1e6}, 1, false, "the scale's initial value (airbench scales some)"},
        {"train_weight", kBool, kAnyBool, 1, false,
         "false: the scale stays at `weight` (not trained, as airbench's batchnorm); the shift still trains"}},
       "batch normalisation over channels: BatchNorm2d on CxHxW samples, BatchNorm1d on features"},
      {LayerType::kLayernorm,
       "ln",
       {{"eps", kReal, above(0), 1e-5, false, "added to the variance"},
        {"last_dim", kBool, kAnyBool, 0, false,
         "true: over the last dimension alone, each token of a [T, D] sample by itself (transformers' "
         "LayerNorm(D)); false: over the whole sample"}},
       "layer normalisation over each sample's whole shape, with a learned scale and shift"},
      {LayerType::kRelu, "relu", {}, "max(0, x)"},
      {LayerType::kGelu, "gelu", {}, "GELU (exact erf form)"},
      {LayerType::kSilu, "silu", {}, "x * sigmoid(x)"},
      {LayerType::kTanh, "tanh", {}, "tanh(x)"},
      {LayerType::kLeakyRelu,
       "leaky_relu",
       {{"negative_slope", kReal, at_least(0), 0.01, false, "slope below zero"}},
       "x, or negative_slope * x below zero"},
      {LayerType::kMaxpool, "pool", pool_keys, "max over each window of CxHxW samples"},
      {LayerType::kAvgpool, "avgpool", pool_keys, "mean over each window of CxHxW samples (zero padding counted)"},
      {LayerType::kAdaptiveAvgpool,
       "gap",
       {{"output_size", kInt, Range{1}, 1, false, "output side: 1 averages each channel to one value"}},
       "mean pooling to a fixed output side, whatever the input's"},
      {LayerType::kFlatten, "flatten", {}, "one feature vector per sample"},
      {LayerType::kLinear,
       "fc",
       {{"out_features", kInt, Range{1}, std::nullopt, false,
         "output width; may be left out on the last layer, which then gives the data set's classes or targets"},
        {"bias", kBool, kAnyBool, 1, false, "add a learned bias"}},
       "fully connected layer over a sample's features (its last dimension)"},
      {LayerType::kDropout,
       "drop",
       {{"p", kReal, Range{0, 1}, 0.5, false, "probability of zeroing each value (training only)"}},
       "dropout"},
      {LayerType::kResidual,
       "res",
       {{"inline", kBool, kAnyBool, 0, false,
         "true: the layers of `layers` and `shortcut` are named in the enclosing list (`layer1.0.conv1`, not "
         "`layer1.0.res1.layers.conv1`), as torchvision's blocks name theirs; false: under the residual's name, "
         "as `<name>.layers.*` and `<name>.shortcut.*`"}},
       "`layers` (a list of layers, required) whose output is added to the input, or to the input passed "
       "through `shortcut` (a list of layers) when given; the two must give the same shape. A ResNet block is a "
       "residual and a `relu` after it (configs/resnet18_folder.yaml, resnet50_folder.yaml)"},
      {LayerType::kPatchEmbedding,
       "patch",
       {{"patch", kInt, Range{1}, std::nullopt, true, "square patch side; must divide the image's sides"},
        {"width", kInt, Range{1}, std::nullopt, true, "each token's width D"},
        {"bias", kBool, kAnyBool, 1, false, "add a learned bias"}},
       "CxHxW images to [H/p × W/p, D] tokens: a patch × patch convolution of stride patch, its output positions "
       "row by row (torchvision's `conv_proj`)"},
      {LayerType::kClassToken,
       "class_token",
       {},
       "[T, D] tokens to [T + 1, D]: a learned token (zeros at first) put first; its one tensor is named by the "
       "layer's name in the list holding it (torchvision's `class_token`)"},
      {LayerType::kPositionEmbedding,
       "pos_embedding",
       {{"std", kReal, above(0), 0.02, false, "the normal draw's standard deviation at first"}},
       "[T, D] tokens plus a learned [T, D]; its one tensor is named by the layer's name in the list holding it "
       "(torchvision's `encoder.pos_embedding`)"},
      {LayerType::kSelfAttention,
       "attn",
       {{"heads", kInt, Range{1}, std::nullopt, true, "attention heads; must divide the tokens' width"},
        {"dropout", kReal, Range{0, 1, false, true}, 0, false, "dropout on the attention weights (training only)"},
        {"bias", kBool, kAnyBool, 1, false, "learned biases on the projections"}},
       "multi-head self-attention over [T, D] tokens on at::scaled_dot_product_attention (flash or "
       "memory-efficient attention on a GPU), its tensors named as torch.nn.MultiheadAttention's (in_proj_weight, "
       "in_proj_bias, out_proj)"},
      {LayerType::kToken,
       "token",
       {{"index", kInt, Range{0}, 0, false, "which token: 0 is the class token"}},
       "[T, D] tokens to the one [D] at `index`"},
      {LayerType::kSequential,
       "seq",
       {},
       "`layers` (a list of layers, required) run in order under the sequential's name, unnamed ones named by "
       "their index as torch.nn.Sequential's (`layer1.0`, `downsample.1`): a named stage or block with "
       "torchvision's tensor names"},
  };
  return kTypes;
}

std::string shown_default(const LayerKey& key) {
  if (key.required) return "required";
  if (!key.fallback) return "derived";
  if (key.kind == LayerValueKind::kBoolean) return *key.fallback != 0 ? "true" : "false";
  return fmt::format("{}", *key.fallback);
}
}  // namespace

const LayerTypeInfo& layer_type_info(LayerType type) {
  for (const auto& info : layer_types()) {
    if (info.type == type) return info;
  }
  unhandled(type);
}

std::optional<double> layer_value(const LayerConfig& layer, const std::string& key) {
  if (const auto given = layer.values.find(key); given != layer.values.end()) return given->second;
  for (const auto& declared : layer_type_info(layer.type).keys) {
    if (declared.key == key) return declared.fallback;
  }
  throw InternalError(fmt::format("layer type {} has no key '{}'", word(layer.type), key));
}

int64_t layer_integer(const LayerConfig& layer, const std::string& key) {
  const auto value = layer_value(layer, key);
  if (!value) throw InternalError(fmt::format("{} ({}) has no value for '{}'", layer.path, word(layer.type), key));
  return static_cast<int64_t>(std::llround(*value));
}

std::string layer_type_table() {
  std::string rows = "| type | keys (default) | what it does |\n|---|---|---|\n";
  for (const auto& info : layer_types()) {
    std::vector<std::string> keys;
    for (const auto& key : info.keys) {
      keys.push_back(fmt::format("`{}` ({}): {}", key.key, shown_default(key), key.doc));
    }
    if (info.type == LayerType::kResidual) keys.insert(keys.begin(), {"`layers` (required)", "`shortcut` ([])"});
    if (info.type == LayerType::kSequential) keys = {"`layers` (required)"};
    rows += fmt::format("| `{}` | {} | {}; default names {}1, {}2, ... (0, 1, ... in a sequential) |\n",
                        word(info.type), keys.empty() ? "—" : fmt::format("{}", fmt::join(keys, "<br>")), info.doc,
                        info.prefix, info.prefix);
  }
  // Not a layer type: the reader spells a group out into its layers.
  return rows +
         "| `repeat: n` (an entry without `type`) | `repeat` (required): 1 to 1000<br>`layers` (required) | its "
         "layers n times in a row, as if written out (`gputrain config` prints them so); default names count on "
         "through the copies (res1, relu1, res2, relu2, ...), so a layer directly in `layers` takes no `name` "
         "when n > 1, unless the name holds `{i}`, which becomes the copy's index (encoder_layer_{i}: "
         "encoder_layer_0, encoder_layer_1, ...) |\n";
}

bool operator==(const LayerConfig& a, const LayerConfig& b) {
  return a.type == b.type && a.name == b.name && a.values == b.values && a.layers == b.layers &&
         a.shortcut == b.shortcut;
}

}  // namespace gputrain::config
