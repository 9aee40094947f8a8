// Reads model.layers. Errors name the layer as the users read it,
// "model.layers[3] (linear): ...", at the position of the value at fault.
#include <fmt/format.h>

#include <cmath>
#include <regex>
#include <set>

#include "gputrain/config/layer_keys.h"
#include "node_reader.h"

namespace gputrain::config::detail {

namespace {

class LayerListReader {
 public:
  LayerListReader(std::string origin, std::optional<SourceMark> override_mark)
      : origin_(std::move(origin)), override_mark_(std::move(override_mark)) {}

  std::vector<LayerConfig> list(const YAML::Node& node, const std::string& path, const SourceMark& where) {
    if (!node.IsSequence()) {
      throw ConfigError(where, path, "expected a list of layers, e.g. [{type: linear, out_features: 64}, relu]");
    }
    std::vector<LayerConfig> layers;
    for (std::size_t i = 0; i < node.size(); ++i) layers.push_back(layer(node[i], fmt::format("{}[{}]", path, i)));
    return layers;
  }

 private:
  SourceMark mark(const YAML::Node& node) const {
    return override_mark_ ? *override_mark_ : mark_from(node.Mark(), origin_);
  }

  static std::vector<std::string> type_words() { return kLayerTypes.words(); }

  LayerType type_of(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) throw ConfigError(mark(node), path, "`type` must be a layer type's word");
    const auto type = kLayerTypes.parse(node.Scalar());
    if (!type)
      throw ConfigError(mark(node), path, "unknown layer type: " + unknown_choice(node.Scalar(), type_words()));
    return *type;
  }

  LayerConfig layer(const YAML::Node& node, const std::string& path) {
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
    if (!type) throw ConfigError(layer.mark, path, "has no `type`; one of " + join_choices(type_words()));
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
      } else if (layer.type == LayerType::kResidual && (key == "layers" || key == "shortcut")) {
        (key == "layers" ? layer.layers : layer.shortcut) = list(entry.second, path + "." + key, mark(entry.second));
      } else if (const LayerKey* declared = find(info, key)) {
        layer.values[key] = value(*declared, entry.second, where);
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
  }

  std::string name(const YAML::Node& node, const std::string& where) const {
    // Names are checkpoint keys, joined with '.' by LibTorch.
    static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
    if (!node.IsScalar() || !std::regex_match(node.Scalar(), kName)) {
      throw ConfigError(mark(node), where,
                        fmt::format("`name` must be letters, digits and '_', not starting with a digit (got {})",
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
};

}  // namespace

void NodeReader::read(const std::string& key, std::vector<LayerConfig>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  const SourceMark where = mark_of(key);
  // A --set value has no useful position of its own: every error points at the --set.
  const bool overridden = where.origin != origin_;
  LayerListReader reader(origin_, overridden ? std::optional<SourceMark>(where) : std::nullopt);
  value = reader.list(node, path(key), where);
}

}  // namespace gputrain::config::detail
