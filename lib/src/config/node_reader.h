#pragma once
// The only place a YAML::Node is visible: reads one mapping, remembers which
// keys were read, and turns every problem into a ConfigError that points at
// the file position or the --set that supplied the value.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/config.h"
#include "gputrain/config/source_map.h"

namespace gputrain::config::detail {

// Marks of values given by --set, which carry no useful YAML position.
using OverrideMarks = std::map<std::string, SourceMark>;

class NodeReader {
 public:
  NodeReader(YAML::Node map, std::string origin, std::string prefix, const OverrideMarks& overrides,
             SourceMap& sources);

  // Readers of one key each; an absent or null key leaves `value` unchanged.
  void read(const std::string& key, std::string& value);
  void read(const std::string& key, bool& value);
  void read(const std::string& key, Switch& value);  // true | false | auto
  void read(const std::string& key, int64_t& value);
  void read(const std::string& key, double& value);
  void read(const std::string& key, std::vector<int64_t>& value);
  void read(const std::string& key, std::vector<double>& value);
  void read(const std::string& key, std::vector<std::string>& value);
  void read(const std::string& key, std::map<std::string, std::string>& value);  // a mapping of text
  void read(const std::string& key, std::optional<int64_t>& value);
  void read(const std::string& key, uint64_t& value);       // an integer >= 0
  void read(const std::string& key, GpuSelection& value);   // all | an index | a list of them
  void read(const std::string& key, DeviceRequest& value);  // auto | cpu | cuda | cuda:N | mps
  void read(const std::string& key, ResumeFrom& value);     // auto | never | a checkpoint path
  void read(const std::string& key, MemoryBudget& value);   // auto | bytes with a unit
  // model.layers: a list of layer mappings, checked against config/layer_keys.h (layer_reader.cpp).
  void read(const std::string& key, std::vector<LayerConfig>& value);
  // A choice: one of the words of the enum's table.
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  void read(const std::string& key, E& value) {
    std::string text = word(value);
    read(key, text);
    const auto& table = choices(value);
    const auto parsed = table.parse(text);
    if (!parsed) fail(key, unknown_choice(text, table.words()));
    value = *parsed;
  }

  // A nested mapping; an absent or null one reads as empty.
  NodeReader section(const std::string& key);
  // The raw node, for keys with more than one shape (gpus: all | [0, 1]).
  YAML::Node raw(const std::string& key);

  // A problem for every key of the mapping that no read asked for (with the
  // closest valid key) and for every duplicate key.
  std::vector<ConfigError> unknown_keys() const;

  [[noreturn]] void fail(const std::string& key, std::string_view problem) const;
  std::string path(const std::string& key) const { return prefix_ + key; }
  SourceMark mark_of(const std::string& key) const;

 private:
  YAML::Node value_node(const std::string& key);
  template <typename T>
  T convert(const std::string& key, const YAML::Node& node, const char* kind);

  YAML::Node map_;
  std::string origin_;
  std::string prefix_;
  const OverrideMarks& overrides_;
  SourceMap& sources_;
  std::set<std::string> known_;
  SourceMark section_mark_;
};

SourceMark mark_from(const YAML::Mark& mark, const std::string& origin);

}  // namespace gputrain::config::detail
