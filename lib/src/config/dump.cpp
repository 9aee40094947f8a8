#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "gputrain/config/layer_keys.h"
#include "gputrain/config/load.h"
#include "gputrain/config/schema.h"

namespace gputrain::config {

namespace {

// Writes each declared key as YAML that the reader takes back unchanged.
class Dumper : public KeysOnly {
 public:
  explicit Dumper(YAML::Emitter& out) : out_(out) {}

  template <typename T, typename C>
  void field(const char* key, const T& value, const C&, const char*) {
    out_ << YAML::Key << key << YAML::Value;
    emit(value);
  }
  template <typename S>
  void section(const char* key, S& sub) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    visit(*this, sub);
    out_ << YAML::EndMap;
  }

 private:
  // Quoted, so that a name or path such as "1e3" or "yes" stays a string.
  void emit(const std::string& value) { out_ << YAML::DoubleQuoted << value; }
  void emit(bool value) { out_ << value; }
  void emit(int64_t value) { out_ << value; }
  void emit(uint64_t value) { out_ << value; }
  // Shortest text that reads back to the same double.
  void emit(double value) { out_ << fmt::format("{}", value); }
  void emit(Switch value) {
    if (value == Switch::kAuto) {
      out_ << "auto";
    } else {
      out_ << (value == Switch::kOn);
    }
  }
  void emit(const std::optional<int64_t>& value) {
    if (value) {
      out_ << *value;
    } else {
      out_ << "auto";
    }
  }
  template <typename T>
  void emit(const std::vector<T>& values) {
    out_ << YAML::Flow << YAML::BeginSeq;
    for (const T& value : values) emit(value);
    out_ << YAML::EndSeq;
  }
  void emit(const std::map<std::string, std::string>& values) {
    out_ << YAML::Flow << YAML::BeginMap;
    for (const auto& [key, value] : values) {
      out_ << YAML::Key << YAML::DoubleQuoted << key << YAML::Value;
      emit(value);
    }
    out_ << YAML::EndMap;
  }
  void emit(const DeviceRequest& device) { out_ << device.text(); }
  void emit(const ResumeFrom& resume) {
    if (resume.kind == ResumeFrom::Kind::kCheckpoint) {
      emit(resume.checkpoint);
    } else {
      out_ << (resume.kind == ResumeFrom::Kind::kAuto ? "auto" : "never");
    }
  }
  void emit(const MemoryBudget& budget) { emit(budget.bytes); }
  void emit(const GpuSelection& gpus) {
    if (gpus.all) {
      out_ << "all";
    } else {
      emit(gpus.indices);
    }
  }
  // A block list of flow mappings, one line per layer; a residual's lists nest inside its mapping.
  void emit(const std::vector<LayerConfig>& layers) {
    if (layers.empty()) out_ << YAML::Flow;
    out_ << YAML::BeginSeq;
    for (const LayerConfig& layer : layers) emit(layer);
    out_ << YAML::EndSeq;
  }
  void emit(const LayerConfig& layer) {
    out_ << YAML::Flow << YAML::BeginMap << YAML::Key << "type" << YAML::Value << word(layer.type);
    if (!layer.name.empty()) out_ << YAML::Key << "name" << YAML::Value << layer.name;
    for (const LayerKey& declared : layer_type_info(layer.type).keys) {
      const auto given = layer.values.find(declared.key);
      if (given == layer.values.end()) continue;
      out_ << YAML::Key << declared.key << YAML::Value;
      switch (declared.kind) {
        case LayerValueKind::kInteger:
          out_ << static_cast<int64_t>(given->second);
          break;
        case LayerValueKind::kBoolean:
          out_ << (given->second != 0);
          break;
        case LayerValueKind::kReal:
          emit(given->second);
          break;
      }
    }
    for (const auto& [key, list] : {std::pair{"layers", &layer.layers}, std::pair{"shortcut", &layer.shortcut}}) {
      if (list->empty()) continue;
      out_ << YAML::Key << key << YAML::Value << YAML::BeginSeq;
      for (const LayerConfig& inner : *list) emit(inner);
      out_ << YAML::EndSeq;
    }
    out_ << YAML::EndMap;
  }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  void emit(E value) {
    out_ << word(value);
  }

  YAML::Emitter& out_;
};

}  // namespace

std::string dump_config(const ExperimentConfig& config) {
  YAML::Emitter out;
  Dumper dumper(out);
  out << YAML::BeginMap;
  ExperimentConfig copy = config;  // visit() serves the reader too, so it takes a mutable config
  visit(dumper, copy);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gputrain::config
