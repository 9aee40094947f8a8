#include "node_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "gputrain/common/strings.h"

namespace gputrain::config::detail {

SourceMark mark_from(const YAML::Mark& mark, const std::string& origin) {
  if (mark.is_null()) return {origin, 0, 0};
  return {origin, mark.line + 1, mark.column + 1};
}

namespace {
// The override mark for `path` or its nearest overridden parent.
const SourceMark* override_mark(const OverrideMarks& overrides, std::string path) {
  while (true) {
    if (auto it = overrides.find(path); it != overrides.end()) return &it->second;
    const auto dot = path.rfind('.');
    if (dot == std::string::npos) return nullptr;
    path.resize(dot);
  }
}

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return fmt::format("'{}'", node.Scalar());
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}
}  // namespace

NodeReader::NodeReader(YAML::Node map, std::string origin, std::string prefix, const OverrideMarks& overrides,
                       SourceMap& sources)
    // An absent key yields a node on which anything but `!node` throws,
    // assignment included; read it as an empty mapping.
    : map_(!map || map.IsNull() ? YAML::Node(YAML::NodeType::Map) : map),
      origin_(std::move(origin)),
      prefix_(std::move(prefix)),
      overrides_(overrides),
      sources_(sources) {
  if (map && !map.IsNull()) section_mark_ = mark_from(map.Mark(), origin_);
}

SourceMark NodeReader::mark_of(const std::string& key) const {
  const std::string full = path(key);
  if (const SourceMark* mark = override_mark(overrides_, full)) return *mark;
  const YAML::Node node = map_[key];
  if (node) return mark_from(node.Mark(), origin_);
  return section_mark_.line > 0 ? section_mark_ : SourceMark{origin_, 0, 0};
}

void NodeReader::fail(const std::string& key, std::string_view problem) const {
  throw ConfigError(mark_of(key), path(key), problem);
}

YAML::Node NodeReader::value_node(const std::string& key) {
  known_.insert(key);
  const YAML::Node& as_const = map_;
  YAML::Node node = as_const[key];
  if (node) sources_.record(path(key), mark_of(key));
  // `lr:`, `batch_size: ~` or `--set optim.lr=` would otherwise mean the
  // built-in default, even over a value the file gave: say so instead.
  if (node && node.IsNull()) {
    fail(key, "has no value (blank or null); give one, or leave the key out to use its default");
  }
  return node;
}

template <typename T>
T NodeReader::convert(const std::string& key, const YAML::Node& node, const char* kind) {
  if (!node.IsScalar()) fail(key, fmt::format("expected {}, got {}", kind, describe(node)));
  T out{};
  if (!YAML::convert<T>::decode(node, out)) fail(key, fmt::format("cannot read '{}' as {}", node.Scalar(), kind));
  return out;
}

void NodeReader::read(const std::string& key, std::string& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = convert<std::string>(key, node, "a string");
  // yaml-cpp passes other bytes through but its emitter does not, so such a
  // string (a Latin-1 path, say) would change on its way through config.yaml.
  if (const std::size_t at = invalid_utf8(value); at != std::string::npos) {
    fail(key, fmt::format("'{}' is not valid UTF-8 (byte 0x{:02x} at offset {}); YAML holds only UTF-8 text, so rename "
                          "the path or reach it through a symbolic link whose name is UTF-8",
                          value, static_cast<unsigned char>(value[at]), at));
  }
}

void NodeReader::read(const std::string& key, bool& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = convert<bool>(key, node, "true or false");
}

void NodeReader::read(const std::string& key, Switch& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  if (node.IsScalar() && node.Scalar() == "auto") {
    value = Switch::kAuto;
    return;
  }
  value = convert<bool>(key, node, "true, false or auto") ? Switch::kOn : Switch::kOff;
}

void NodeReader::read(const std::string& key, int64_t& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = convert<int64_t>(key, node, "an integer");
}

namespace {
// yaml-cpp reads .inf and .nan, but config.yaml would print them as inf and
// nan, which it does not read back; no key has a use for them. Training
// computes in float32, so a larger number (an lr of 1e300, say) would only
// fail later, inside LibTorch, as a conversion error.
template <typename T>
void require_finite(const NodeReader& reader, const std::string& key, T value, const YAML::Node& node) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) reader.fail(key, fmt::format("must be a finite number (got {})", node.Scalar()));
    if (std::abs(value) > std::numeric_limits<float>::max()) {
      reader.fail(key,
                  fmt::format("{} is beyond float32's range (±3.4e38), in which training computes", node.Scalar()));
    }
  }
}
}  // namespace

void NodeReader::read(const std::string& key, double& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = convert<double>(key, node, "a number");
  require_finite(*this, key, value, node);
}

void NodeReader::read(const std::string& key, std::optional<int64_t>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  if (node.IsScalar() && node.Scalar() == "auto") {
    value.reset();
    return;
  }
  value = convert<int64_t>(key, node, "an integer or auto");
}

namespace {
template <typename T>
std::vector<T> read_list(NodeReader& reader, const std::string& key, const YAML::Node& node, const char* kind) {
  std::vector<T> out;
  if (node.IsScalar()) {  // a single value stands for a one-element list
    T one{};
    if (!YAML::convert<T>::decode(node, one))
      reader.fail(key, fmt::format("cannot read '{}' as {}", node.Scalar(), kind));
    require_finite(reader, key, one, node);
    out.push_back(one);
    return out;
  }
  if (!node.IsSequence()) reader.fail(key, fmt::format("expected a list of {}", kind));
  for (std::size_t i = 0; i < node.size(); ++i) {
    T item{};
    if (!node[i].IsScalar() || !YAML::convert<T>::decode(node[i], item)) {
      reader.fail(key, fmt::format("item {} ({}) is not {}", i, describe(node[i]), kind));
    }
    require_finite(reader, key, item, node[i]);
    out.push_back(item);
  }
  return out;
}
}  // namespace

void NodeReader::read(const std::string& key, std::vector<int64_t>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = read_list<int64_t>(*this, key, node, "an integer");
}

void NodeReader::read(const std::string& key, std::vector<double>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = read_list<double>(*this, key, node, "a number");
}

void NodeReader::read(const std::string& key, std::vector<std::string>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  value = read_list<std::string>(*this, key, node, "text");
}

void NodeReader::read(const std::string& key, std::map<std::string, std::string>& value) {
  const YAML::Node node = value_node(key);
  if (!node || node.IsNull()) return;
  if (!node.IsMap())
    fail(key, fmt::format("expected a mapping of text, e.g. {{team: vision}}, got {}", describe(node)));
  std::map<std::string, std::string> out;
  for (const auto& entry : node) {
    if (!entry.second.IsScalar()) {
      fail(key, fmt::format("'{}' is {}; each value is text", entry.first.Scalar(), describe(entry.second)));
    }
    if (!out.emplace(entry.first.Scalar(), entry.second.Scalar()).second) {
      fail(key, fmt::format("'{}' is given twice", entry.first.Scalar()));
    }
  }
  value = std::move(out);
}

void NodeReader::read(const std::string& key, uint64_t& value) {
  int64_t signed_value = static_cast<int64_t>(value);
  read(key, signed_value);
  if (signed_value < 0) fail(key, fmt::format("must be >= 0 (got {})", signed_value));
  value = static_cast<uint64_t>(signed_value);
}

void NodeReader::read(const std::string& key, GpuSelection& value) {
  const YAML::Node node = raw(key);
  if (!node || node.IsNull()) return;
  if (node.IsScalar() && node.Scalar() == "all") {
    value = GpuSelection{};
    return;
  }
  std::vector<int64_t> indices;
  read(key, indices);  // a single index or a list of them
  if (indices.empty()) fail(key, "needs 'all' or at least one GPU index, e.g. [0, 1]");
  std::set<int64_t> seen;
  for (int64_t index : indices) {
    if (index < 0) fail(key, fmt::format("GPU indices are >= 0 (got {})", index));
    if (!seen.insert(index).second) fail(key, fmt::format("GPU {} is listed twice", index));
  }
  value.all = false;
  value.indices = std::move(indices);
}

void NodeReader::read(const std::string& key, DeviceRequest& value) {
  const YAML::Node node = raw(key);
  if (!node || node.IsNull()) return;
  std::string text;
  read(key, text);
  const std::optional<DeviceRequest> parsed = DeviceRequest::parse(text);
  if (!parsed) fail(key, fmt::format("unknown device '{}'; allowed: auto, cpu, cuda, cuda:N or mps", text));
  value = *parsed;
}

void NodeReader::read(const std::string& key, ResumeFrom& value) {
  const YAML::Node node = raw(key);
  if (!node || node.IsNull()) return;
  std::string text;
  read(key, text);
  if (text.empty()) fail(key, "is empty; write auto, never or a checkpoint file");
  if (text == "auto") {
    value = ResumeFrom{};
  } else if (text == "never") {
    value = ResumeFrom{ResumeFrom::Kind::kNever, ""};
  } else {
    value = ResumeFrom{ResumeFrom::Kind::kCheckpoint, text};
  }
}

void NodeReader::read(const std::string& key, MemoryBudget& value) {
  const YAML::Node node = raw(key);
  if (!node || node.IsNull()) return;
  std::string text;
  read(key, text);
  if (text == "auto") {
    value = MemoryBudget{};
    return;
  }
  const std::optional<int64_t> bytes = parse_bytes(text);
  if (!bytes) fail(key, fmt::format("'{}' is not a size; write auto or bytes with a unit: 2GiB, 512MiB, 1.5GB", text));
  value.bytes = bytes;
}

NodeReader NodeReader::section(const std::string& key) {
  YAML::Node node = value_node(key);
  if (node && !node.IsNull() && !node.IsMap()) {
    fail(key, fmt::format("expected a mapping of keys, got {}", describe(node)));
  }
  return NodeReader(node, origin_, path(key) + ".", overrides_, sources_);
}

YAML::Node NodeReader::raw(const std::string& key) { return value_node(key); }

std::vector<ConfigError> NodeReader::unknown_keys() const {
  std::vector<ConfigError> problems;
  std::set<std::string> seen;
  const std::vector<std::string> valid(known_.begin(), known_.end());
  for (const auto& entry : map_) {
    const std::string key = entry.first.Scalar();
    const SourceMark* given = override_mark(overrides_, path(key));
    SourceMark at = given ? *given : mark_from(entry.first.Mark(), origin_);
    // A key from a file this one extends: the key's own position in that file.
    if (given && given->line > 0) at = mark_from(entry.first.Mark(), given->origin);
    // A key the file does not have came from a --set of a key below it (--set data.foo.bar=1).
    if (entry.first.Mark().is_null()) {
      const auto child = overrides_.lower_bound(path(key) + ".");
      if (child != overrides_.end() && child->first.rfind(path(key) + ".", 0) == 0) at = child->second;
    }
    if (!seen.insert(key).second) {
      problems.emplace_back(at, path(key), "duplicate key");
      continue;
    }
    if (known_.count(key)) continue;
    std::string problem = "unknown key";
    if (const std::string near = closest_match(key, valid); !near.empty()) {
      problem += fmt::format("; did you mean '{}'?", near);
    } else {
      problem += fmt::format("; valid keys here: {}", join_choices(valid));
    }
    problems.emplace_back(at, path(key), problem);
  }
  return problems;
}

}  // namespace gputrain::config::detail
