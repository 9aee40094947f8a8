#include "read.h"

#include <fmt/format.h>

#include "gputrain/config/schema.h"

namespace gputrain::config::detail {

namespace {

// Reads each declared key through a NodeReader, enforces its constraint and
// the checks across keys, and refuses keys no declaration names.
class Reader {
 public:
  Reader(NodeReader& reader, const SourceMap& sources) : reader_(reader), sources_(sources) {}

  template <typename T, typename C>
  void field(const char* key, T& value, const C& constraint, const char* /*doc*/) {
    reader_.read(key, value);
    enforce(key, value, constraint);
  }

  template <typename S>
  void section(const char* key, S& sub) {
    NodeReader inner = reader_.section(key);
    Reader reader(inner, sources_);
    visit(reader, sub);
    inner.reject_unknown_keys();
  }

  template <typename Message>
  void check(const std::string& key, bool ok, const Message& message) {
    if (ok) return;
    // A rule across sections names its key from the top; its mark is where that key was read.
    if (key.find('.') == std::string::npos) reader_.fail(key, message());
    throw ConfigError(sources_.at(reader_.path(key)), reader_.path(key), message());
  }

 private:
  template <typename T>
  void enforce(const char*, const T&, const Any&) {}

  void enforce(const char* key, int64_t value, const Min& at_least) {
    if (value < at_least.min) reader_.fail(key, fmt::format("must be {} (got {})", describe(at_least), value));
  }
  void enforce(const char* key, const std::optional<int64_t>& value, const Min& at_least) {
    if (value) enforce(key, *value, at_least);
  }
  void enforce(const char* key, const std::vector<int64_t>& values, const Min& at_least) {
    for (int64_t value : values) {
      if (value < at_least.min) {
        reader_.fail(key, fmt::format("every value must be {} (got {})", describe(at_least), value));
      }
    }
  }
  static bool within(double value, const Range& range) {
    const bool above_min = range.min_open ? value > range.min : value >= range.min;
    const bool below_max = range.max_open ? value < range.max : value <= range.max;
    return above_min && below_max;
  }
  void enforce(const char* key, double value, const Range& range) {
    if (!within(value, range)) reader_.fail(key, fmt::format("must be {} (got {})", describe(range), value));
  }
  void enforce(const char* key, const std::vector<double>& values, const Range& range) {
    for (double value : values) {
      if (!within(value, range)) {
        reader_.fail(key, fmt::format("every value must be {} (got {})", describe(range), value));
      }
    }
  }

  NodeReader& reader_;
  const SourceMap& sources_;
};

}  // namespace

ExperimentConfig read_experiment(NodeReader& root, const SourceMap& sources) {
  ExperimentConfig config;
  Reader reader(root, sources);
  visit(reader, config);
  root.reject_unknown_keys();
  if (config.data.root.empty()) config.data.root = default_data_root(config.data.dataset);
  return config;
}

}  // namespace gputrain::config::detail
