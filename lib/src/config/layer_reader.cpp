// Reads model.layers. Errors name the layer as the users read it,
// "model.layers[3] (linear): ...", at the position of the value at fault.
// A group `{repeat: n, layers: [...]}` is spelled out here, into its layers n
// times, so models/ and the dump see only layers.
#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>

#include "gputrain/config/layer_keys.h"
#include "node_reader.h"

namespace gputrain::config::detail {

namespace {

// A group's copies could multiply past any network's size (groups nest): refused beyond this many layers.
constexpr int64_t kMaxLayers = 100000;
constexpr int64_t kMaxRepeat = 1000;
// In the name of a layer directly in a repeated group: the copy's index, 0 first.
constexpr const char* kCopyIndex = "{i}";

// Layers in `layers`, those of residual branches included.
int64_t count_layers(const std::vector<LayerConfig>& layers) {
  int64_t count = 0;
  for (const auto& layer : layers) count += 1 + count_layers(layer.layers) + count_layers(layer.shortcut);
  return count;
}

class LayerListReader {
 public:
  LayerListReader(std::string origin, std::optional<SourceMark> override_mark)
      : origin_(std::move(origin)), override_mark_(std::move(override_mark)) {}

  std::vector<LayerConfig> list(const YAML::Node& node, const std::string& path, const SourceMark& where) {
    if (!node.IsSequence()) {
      throw ConfigError(where, path, "expected a list of layers, e.g. [{type: linear, out_features: 64}, relu]");
    }
    std::vector<LayerConfig> layers;
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string at = fmt::format("{}[{}]", path, i);
      if (node[i].IsMap() && node[i]["repeat"] && !node[i]["type"]) {
        repeat(node[i], at, layers);
      } else {
        layers.push_back(layer(node[i], at));
      }
    }
    return layers;
  }

 private:
  SourceMark mark(const YAML::Node& node) const {
    return override_mark_ ? *override_mark_ : mark_from(node.Mark(), origin_);
  }

  static std::vector<std::string> type_words() { return kLayerTypes.words(); }

  // `{repeat: n, layers: [...]}`: its layers appended to `into` n times, as if written out.
  void repeat(const YAML::Node& node, const std::string& path, std::vector<LayerConfig>& into) {
    const SourceMark at = mark(node);
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      if (!seen.insert(key).second) {
        throw ConfigError(mark(entry.first), path + " (repeat)", fmt::format("`{}` is given twice", key));
      }
      if (key != "repeat" && key != "layers") {
        std::string problem = fmt::format("unknown key `{}`", key);
        if (const std::string near = closest_match(key, {"repeat", "layers"}); !near.empty())
          problem += fmt::format(" (did you mean `{}`?)", near);
        throw ConfigError(mark(entry.first), path + " (repeat)",
                          problem + "; a group of layers takes repeat and layers (a layer has a `type`)");
      }
    }
    const YAML::Node times_node = node["repeat"];
    int64_t times = 0;
    if (!times_node.IsScalar() || !YAML::convert<int64_t>::decode(times_node, times) || times < 1 ||
        times > kMaxRepeat) {
      throw ConfigError(
          mark(times_node), path + " (repeat)",
          fmt::format("`repeat` must be an integer in [1, {}], the times its layers are given (got {})", kMaxRepeat,
                      times_node.IsScalar() ? "'" + times_node.Scalar() + "'"
                      : times_node.IsNull() ? "no value"
                                            : "a list or mapping"));
    }
    if (!node["layers"] || node["layers"].IsNull()) {
      throw ConfigError(at, path + " (repeat)", "needs `layers`: the list of layers given `repeat` times in a row");
    }
    const std::vector<LayerConfig> group = list(node["layers"], path + ".layers", mark(node["layers"]));
    if (group.empty()) {
      throw ConfigError(mark(node["layers"]), path + " (repeat)", "`layers` is empty; give the layers to repeat");
    }
    for (const auto& layer : group) {
      if (times > 1 && !layer.name.empty() && layer.name.find(kCopyIndex) == std::string::npos) {
        throw ConfigError(layer.mark, fmt::format("{} ({})", layer.path, word(layer.type)),
                          fmt::format("is repeated {} times, so it cannot be named '{}': the copies would share "
                                      "the name (a checkpoint key); leave `name` out for counted names, or put "
                                      "{} in it for the copy's index (encoder_layer_{})",
                                      times, layer.name, kCopyIndex, kCopyIndex));
      }
    }
    layers_made_ += (times - 1) * count_layers(group);
    if (layers_made_ > kMaxLayers) {
      throw ConfigError(mark(times_node), path + " (repeat)",
                        fmt::format("makes the network more than {} layers long; repeat fewer times", kMaxLayers));
    }
    for (int64_t copy = 0; copy < times; ++copy) {
      for (LayerConfig layer : group) {
        if (const auto at = layer.name.find(kCopyIndex); at != std::string::npos) {
          layer.name.replace(at, std::string_view(kCopyIndex).size(), std::to_string(copy));
        }
        into.push_back(std::move(layer));
      }
    }
  }

  LayerType type_of(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) throw ConfigError(mark(node), path, "`type` must be a layer type's word");
    const auto type = kLayerTypes.parse(node.Scalar());
    if (!type)
      throw ConfigError(mark(node), path, "unknown layer type: " + unknown_choice(node.Scalar(), type_words()));
    return *type;
  }

  LayerConfig layer(const YAML::Node& node, const std::string& path) {
    ++layers_made_;
    LayerConfig layer;
    layer.path = path;
    layer.mark = mark(node);
    if (node.IsScalar()) {  // `- relu` stands for `- {type: relu}`
      layer.type = type_of(node, path);
      require_keys(layer, path);
      return layer;
    }
    if (!node.IsMap()) {
      throw ConfigError(layer.mark, path,
                        "expected a layer: a mapping such as {type: conv2d, out_channels: 64, kernel: 3}, "
                        "or a type's word such as relu");
    }
    const YAML::Node type = node["type"];
    if (!type) {
      throw ConfigError(layer.mark, path,
                        "has no `type`; one of " + join_choices(type_words()) +
                            ", or a group of layers given n times: {repeat: n, layers: [...]}");
    }
    layer.type = type_of(type, path);
    const std::string where = fmt::format("{} ({})", path, word(layer.type));
    const LayerTypeInfo& info = layer_type_info(layer.type);
    std::set<std::string> seen;
    for (const auto& entry : node) {
      const std::string key = entry.first.Scalar();
      const SourceMark at = mark(entry.first);
      if (!seen.insert(key).second) throw ConfigError(at, where, fmt::format("`{}` is given twice", key));
      if (key == "type") continue;
      if (entry.second.IsNull()) {
        throw ConfigError(at, where, fmt::format("`{}` has no value; give one, or leave the key out", key));
      }
      if (key == "name") {
        layer.name = name(entry.second, where);
      } else if ((layer.type == LayerType::kResidual && (key == "layers" || key == "shortcut")) ||
                 (layer.type == LayerType::kSequential && key == "layers")) {
        (key == "layers" ? layer.layers : layer.shortcut) = list(entry.second, path + "." + key, mark(entry.second));
      } else if (const LayerKey* declared = find(info, key)) {
        layer.values[key] = value(*declared, entry.second, where);
      } else if (key == "repeat") {
        throw ConfigError(at, where,
                          fmt::format("`repeat` makes a group, which has no `type`: put the layer in one, "
                                      "{{repeat: n, layers: [{{type: {}, ...}}]}}",
                                      word(layer.type)));
      } else {
        throw ConfigError(at, where, unknown_key(info, key));
      }
    }
    require_keys(layer, where);
    return layer;
  }

  static const LayerKey* find(const LayerTypeInfo& info, const std::string& key) {
    for (const auto& declared : info.keys) {
      if (declared.key == key) return &declared;
    }
    return nullptr;
  }

  static std::vector<std::string> keys_of(const LayerTypeInfo& info) {
    std::vector<std::string> keys{"type", "name"};
    for (const auto& declared : info.keys) keys.emplace_back(declared.key);
    if (info.type == LayerType::kResidual) keys.insert(keys.end(), {"layers", "shortcut"});
    if (info.type == LayerType::kSequential) keys.emplace_back("layers");
    return keys;
  }

  static std::string unknown_key(const LayerTypeInfo& info, const std::string& key) {
    const auto keys = keys_of(info);
    std::string problem = fmt::format("unknown key `{}`", key);
    if (const std::string near = closest_match(key, keys); !near.empty())
      problem += fmt::format(" (did you mean `{}`?)", near);
    return problem + fmt::format("; {} takes {}", word(info.type), join_choices(keys));
  }

  void require_keys(const LayerConfig& layer, const std::string& where) const {
    for (const auto& declared : layer_type_info(layer.type).keys) {
      if (declared.required && !layer.values.count(declared.key)) {
        throw ConfigError(layer.mark, where, fmt::format("needs `{}` ({})", declared.key, declared.doc));
      }
    }
    if (layer.type == LayerType::kResidual && layer.layers.empty()) {
      throw ConfigError(layer.mark, where, "needs `layers`: the list whose output is added to the residual's input");
    }
    if (layer.type == LayerType::kSequential && layer.layers.empty()) {
      throw ConfigError(layer.mark, where, "needs `layers`: the list it runs in order, under its name");
    }
  }

  std::string name(const YAML::Node& node, const std::string& where) const {
    // Names are checkpoint keys, joined with '.' by LibTorch; digits alone are
    // torch.nn.Sequential's names ("layer1.0"). `{i}`: a repeated copy's index.
    static const std::regex kName("([A-Za-z0-9_]|\\{i\\})+");
    if (!node.IsScalar() || !std::regex_match(node.Scalar(), kName)) {
      throw ConfigError(
          mark(node), where,
          fmt::format("`name` must be letters, digits and '_' (and `{}` in a repeated group) (got {})", kCopyIndex,
                      node.IsScalar() ? "'" + node.Scalar() + "'" : std::string("a list or mapping")));
    }
    return node.Scalar();
  }

  double value(const LayerKey& declared, const YAML::Node& node, const std::string& where) const {
    const SourceMark at = mark(node);
    const auto fail = [&](const std::string& expected) {
      throw ConfigError(at, where,
                        fmt::format("`{}` must be {} (got {})", declared.key, expected,
                                    node.IsScalar() ? "'" + node.Scalar() + "'" : std::string("a list or mapping")));
    };
    if (!node.IsScalar()) fail("a single value");
    if (declared.kind == LayerValueKind::kBoolean) {
      bool flag = false;
      if (!YAML::convert<bool>::decode(node, flag)) fail("true or false");
      return flag ? 1 : 0;
    }
    double number = 0;
    if (declared.kind == LayerValueKind::kInteger) {
      int64_t integer = 0;
      if (!YAML::convert<int64_t>::decode(node, integer)) fail("an integer");
      number = static_cast<double>(integer);
    } else if (!YAML::convert<double>::decode(node, number) || !std::isfinite(number)) {
      fail("a finite number");
    }
    const Range& range = declared.range;
    const bool above_min = range.min_open ? number > range.min : number >= range.min;
    const bool below_max = range.max_open ? number < range.max : number <= range.max;
    if (!above_min || !below_max) fail(describe(range));
    return number;
  }

  std::string origin_;
  std::optional<SourceMark> override_mark_;
  int64_t layers_made_ = 0;  // read and copied so far, against kMaxLayers
};

// A `{i}` left in a name: the layer is in no repeated group, so no copy index replaced it.
void refuse_copy_index(const std::vector<LayerConfig>& layers) {
  for (const LayerConfig& layer : layers) {
    if (layer.name.find(kCopyIndex) != std::string::npos) {
      throw ConfigError(layer.mark, fmt::format("{} ({})", layer.path, word(layer.type)),
                        fmt::format("its name '{}' holds {}, the copy's index, but it is in no repeated group "
                                    "({{repeat: n, layers: [...]}}); name it without {}",
                                    layer.name, kCopyIndex, kCopyIndex));
    }
    refuse_copy_index(layer.layers);
    refuse_copy_index(layer.shortcut);
  }
}

}  // namespace

void NodeReader::read(const std::string& key, std::vector<LayerConfig>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  const SourceMark where = mark_of(key);
  // A --set value has no useful position of its own: every error points at the --set.
  // A file's (this one's or one it extends) has: each layer's own line in that file.
  const bool overridden = where.origin != origin_ && where.line == 0;
  LayerListReader reader(where.line > 0 ? where.origin : origin_,
                         overridden ? std::optional<SourceMark>(where) : std::nullopt);
  value = reader.list(node, path(key), where);
  refuse_copy_index(value);
}

}  // namespace gputrain::config::detail
