#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gputrain/common/strings.h"
#include "gputrain/config/layer_keys.h"
#include "gputrain/config/load.h"
#include "gputrain/config/schema.h"

namespace gputrain::config {

namespace {

std::string code(const std::string& text) { return "`" + text + "`"; }

// One markdown row per declared key: its dotted name, default, the values it
// takes and its meaning.
class KeyTable : public KeysOnly {
 public:
  explicit KeyTable(std::string prefix = "") : prefix_(std::move(prefix)) {}

  template <typename T, typename C>
  void field(const char* key, const T& value, const C& constraint, const char* doc) {
    rows_.push_back({prefix_ + key, shown(value), values(value, constraint), doc});
  }
  template <typename S>
  void section(const char* key, S& sub) {
    KeyTable inner(prefix_ + key + ".");
    visit(inner, sub);
    rows_.insert(rows_.end(), inner.rows_.begin(), inner.rows_.end());
  }
  // Said in the meaning of each key it covers (a section: each of its keys).
  void fixed_on_resume(const char* key, FixedOnResume when) {
    const std::string fixed = prefix_ + key;
    for (Row& row : rows_) {
      if (row.key != fixed && row.key.rfind(fixed + ".", 0) != 0) continue;
      if (!row.meaning.empty() && row.meaning.back() == '.') row.meaning.pop_back();
      row.meaning += when == FixedOnResume::kAlways ? ". Fixed on resume" : ". Fixed on resume inside an epoch";
    }
  }

  std::string rows() const {
    std::string out;
    for (const Row& row : rows_) {
      out += fmt::format("| {} | {} | {} | {} |\n", code(row.key), row.default_value, row.values, row.meaning);
    }
    return out;
  }

 private:
  static std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }
  static std::string shown(bool value) { return value ? "true" : "false"; }
  static std::string shown(int64_t value) { return std::to_string(value); }
  static std::string shown(uint64_t value) { return std::to_string(value); }
  static std::string shown(double value) { return fmt::format("{}", value); }
  static std::string shown(Switch value) { return value == Switch::kAuto ? "auto" : shown(value == Switch::kOn); }
  static std::string shown(const std::optional<int64_t>& value) { return value ? shown(*value) : "auto"; }
  static std::string shown(const GpuSelection& gpus) { return gpus.all ? "all" : shown(gpus.indices); }
  static std::string shown(const std::map<std::string, std::string>& values) { return values.empty() ? "{}" : "..."; }
  static std::string shown(const DeviceRequest& device) { return device.text(); }
  static std::string shown(const ResumeFrom&) { return "auto"; }
  static std::string shown(const MemoryBudget& budget) { return shown(budget.bytes); }
  static std::string shown(const LayerConfig& layer) { return word(layer.type); }
  template <typename T>
  static std::string shown(const std::vector<T>& values) {
    std::vector<std::string> items;
    for (const T& value : values) items.push_back(shown(value));
    return "[" + fmt::format("{}", fmt::join(items, ", ")) + "]";
  }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  static std::string shown(E value) {
    return word(value);
  }

  static std::string values(const std::string&, const Any&) { return "text"; }
  static std::string values(bool, const Any&) { return "true, false"; }
  static std::string values(uint64_t, const Any&) { return ">= 0"; }
  static std::string values(Switch, const Any&) { return "true, false, auto"; }
  static std::string values(const GpuSelection&, const Any&) { return "`all` or GPU indices"; }
  static std::string values(const DeviceRequest&, const Any&) { return "`auto`, `cpu`, `cuda`, `cuda:N`, `mps`"; }
  static std::string values(const ResumeFrom&, const Any&) { return "`auto`, `never` or a checkpoint file"; }
  static std::string values(const MemoryBudget&, const Any&) { return "`auto` or bytes: `2GiB`, `512MiB`"; }
  static std::string values(int64_t, const Min& constraint) { return describe(constraint); }
  static std::string values(const std::optional<int64_t>&, const Min& constraint) {
    return "`auto` or " + describe(constraint);
  }
  static std::string values(double, const Range& constraint) { return describe(constraint); }
  static std::string values(const std::vector<double>&, const Any&) { return "list of numbers"; }
  static std::string values(const std::vector<std::string>&, const Any&) { return "list of text"; }
  static std::string values(const std::map<std::string, std::string>&, const Any&) { return "mapping of text"; }
  static std::string values(const std::vector<LayerConfig>&, const Any&) { return "list of layers"; }
  template <typename T, typename C>
  static std::string values(const std::vector<T>&, const C& constraint) {
    return "list, each " + describe(constraint);
  }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  static std::string values(E value, const Any&) {
    std::vector<std::string> words;
    for (const auto& word : choices(value).words()) words.push_back(code(word));
    return fmt::format("{}", fmt::join(words, ", "));
  }

  struct Row {
    std::string key, default_value, values, meaning;
  };
  std::string prefix_;
  std::vector<Row> rows_;
};

}  // namespace

std::string key_table() {
  ExperimentConfig defaults;
  KeyTable table;
  visit(table, defaults);
  return "| key | default | values | meaning |\n|---|---|---|---|\n" + table.rows() +
         "\nLayer types of `model.layers`:\n\n" + layer_type_table();
}

}  // namespace gputrain::config
