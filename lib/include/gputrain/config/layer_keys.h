#pragma once
// The keys of each model.layers type, declared once: the reader checks a
// layer against its type's row, the key table documents it, and models/ reads
// values through layer_value(). Every type also takes `type` and `name`;
// residual takes the lists `layers` and `shortcut`, sequential the list `layers`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/config/schema.h"

namespace gputrain::config {

enum class LayerValueKind { kInteger, kReal, kBoolean };

struct LayerKey {
  const char* key;
  LayerValueKind kind;
  Range range;                     // the values allowed (booleans: unused)
  std::optional<double> fallback;  // the default; nullopt: required, or derived as `doc` says
  bool required;
  const char* doc;
};

struct LayerTypeInfo {
  LayerType type;
  const char* prefix;  // default names are the prefix and a count per prefix: conv1, conv2, ...
  std::vector<LayerKey> keys;
  const char* doc;
};

const LayerTypeInfo& layer_type_info(LayerType type);

// The value of `key` as the layer gives it, else its type's default; nullopt
// when neither (a derived default such as a pool's stride).
std::optional<double> layer_value(const LayerConfig& layer, const std::string& key);
// An integer key that has a value or a default.
int64_t layer_integer(const LayerConfig& layer, const std::string& key);

// configs/README.md's reference of layer types: one markdown row per type with its keys and defaults.
std::string layer_type_table();

}  // namespace gputrain::config
