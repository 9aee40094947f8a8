#include "read.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <any>
#include <map>
#include <optional>

#include "gputrain/config/schema.h"

namespace gputrain::config::detail {

namespace {

// Reads each declared key through a NodeReader, enforces its constraint and
// the checks across keys, and refuses keys no declaration names. It goes on
// past a problem, so that one run of `gputrain config` lists them all: a key
// at fault keeps its default, and a check is skipped when its key is at fault
// already (its message would be about the default, not the user's value).
class Reader {
 public:
  Reader(NodeReader& reader, const SourceMap& sources, Problems& problems)
      : reader_(reader), sources_(sources), problems_(problems) {}

  template <typename T, typename C>
  void field(const char* key, T& value, const C& constraint, const char* /*doc*/) {
    const T before = value;
    try {
      reader_.read(key, value);
      enforce(key, value, constraint);
    } catch (const ConfigError& e) {
      value = before;
      problems_.add(reader_.path(key), e);
    }
  }

  template <typename S>
  void section(const char* key, S& sub) {
    std::optional<NodeReader> inner;
    try {
      inner.emplace(reader_.section(key));
    } catch (const ConfigError& e) {
      problems_.add(reader_.path(key), e);
      return;
    }
    Reader reader(*inner, sources_, problems_);
    visit(reader, sub);
    for (const ConfigError& e : inner->unknown_keys()) problems_.add(e.key(), e);
  }

  // A key left out takes `implied` when `when` holds (model.layers makes model.name `layers`).
  template <typename T>
  void imply(const char* key, T& value, const T& implied, bool when) {
    if (when && !sources_.exact(reader_.path(key)).known()) value = implied;
  }

  void fixed_on_resume(const char*, FixedOnResume) {}

  template <typename Message>
  void check(const std::string& key, bool ok, const Message& message) {
    if (ok) return;
    // A rule across sections names its key from the top; its mark is where that key was read.
    const bool local = key.find('.') == std::string::npos;
    const std::string full = local ? reader_.path(key) : key;
    if (problems_.blames(full)) return;
    const SourceMark at = local ? reader_.mark_of(key) : sources_.at(full);
    problems_.add(full, ConfigError(at, full, message()));
  }

 private:
  template <typename T>
  void enforce(const char*, const T&, const Any&) {}

  static bool within(int64_t value, const Min& range) { return value >= range.min && value <= range.max; }
  void enforce(const char* key, int64_t value, const Min& range) {
    if (!within(value, range)) reader_.fail(key, fmt::format("must be {} (got {})", describe(range), value));
  }
  void enforce(const char* key, const std::optional<int64_t>& value, const Min& range) {
    if (value) enforce(key, *value, range);
  }
  void enforce(const char* key, const std::vector<int64_t>& values, const Min& range) {
    for (int64_t value : values) {
      if (!within(value, range)) {
        reader_.fail(key, fmt::format("every value must be {} (got {})", describe(range), value));
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
  Problems& problems_;
};

// A visitor that knows each field's dotted path: `Self` gets field(path, ...).
template <typename Self>
class PathVisitor : public KeysOnly {
 public:
  template <typename T, typename C>
  void field(const char* key, T& value, const C&, const char*) {
    static_cast<Self&>(*this).at(prefix_ + key, value);
  }
  template <typename S>
  void section(const char* key, S& sub) {
    const std::string outer = prefix_;
    prefix_ += std::string(key) + ".";
    visit(static_cast<Self&>(*this), sub);
    prefix_ = outer;
  }

 private:
  std::string prefix_;
};

// Every key's path in the order schema.h declares it, with its value in the
// config visited: a default config's values are what a key at fault falls back to.
class Values : public PathVisitor<Values> {
 public:
  template <typename T>
  void at(const std::string& path, T& value) {
    paths.push_back(path);
    values[path] = value;
  }

  std::vector<std::string> paths;
  std::map<std::string, std::any> values;
};

// Sets the keys of `reset` to the values of `defaults`.
class Resetter : public PathVisitor<Resetter> {
 public:
  Resetter(const std::map<std::string, std::any>& defaults, const std::set<std::string>& reset)
      : defaults_(defaults), reset_(reset) {}
  template <typename T>
  void at(const std::string& path, T& value) {
    if (reset_.count(path) > 0) value = std::any_cast<T>(defaults_.at(path));
  }

 private:
  const std::map<std::string, std::any>& defaults_;
  const std::set<std::string>& reset_;
};

// How many rules across keys `config` breaks.
class RuleCount {
 public:
  template <typename T, typename C>
  void field(const char*, T&, const C&, const char*) {}
  template <typename S>
  void section(const char*, S& sub) {
    visit(*this, sub);
  }
  template <typename Message>
  void check(const std::string& key, bool ok, const Message&) {
    if (!ok) broken.push_back(key);
  }
  template <typename T>
  void imply(const char*, T&, const T&, bool) {}
  void fixed_on_resume(const char*, FixedOnResume) {}

  std::vector<std::string> broken;  // each broken rule's key, below its section
};

std::size_t broken_rules(ExperimentConfig config) {
  RuleCount count;
  visit(count, config);
  return count.broken.size();
}

ExperimentConfig with_defaults(ExperimentConfig config, const std::map<std::string, std::any>& defaults,
                               const std::set<std::string>& keys) {
  Resetter reset(defaults, keys);
  visit(reset, config);
  return config;
}

// A config that breaks no rule across keys, for the parts of a run that can
// still be resolved after its problems were listed: a key the reader refused
// kept its default already; a rule still broken falls back by the fewest
// keys the user set (in schema order), each back to its default. The config
// of defaults breaks none, so this ends.
ExperimentConfig fallback(ExperimentConfig config, const SourceMap& sources) {
  ExperimentConfig defaults;
  Values known;
  visit(known, defaults);
  std::vector<std::string> set_keys;
  for (const std::string& path : known.paths) {
    if (sources.exact(path).known()) set_keys.push_back(path);
  }
  for (std::size_t broken = broken_rules(config); broken > 0;) {
    std::optional<ExperimentConfig> fewer;
    for (const std::string& key : set_keys) {  // one key back to its default
      ExperimentConfig trial = with_defaults(config, known.values, {key});
      if (broken_rules(trial) < broken) {
        fewer = std::move(trial);
        break;
      }
    }
    if (!fewer) {  // several at once: the first keys set, until a rule holds
      std::set<std::string> keys;
      for (const std::string& key : set_keys) {
        keys.insert(key);
        fewer = with_defaults(config, known.values, keys);
        if (broken_rules(*fewer) < broken) break;
      }
    }
    if (!fewer || broken_rules(*fewer) >= broken) return defaults;
    config = std::move(*fewer);
    broken = broken_rules(config);
  }
  return config;
}

}  // namespace

void Problems::add(const std::string& key, const ConfigError& problem) {
  all_.push_back(problem);
  keys_.insert(key);
}

void Problems::throw_any() const {
  if (all_.size() == 1) throw all_.front();
  if (!all_.empty()) throw ConfigErrors(all_);
}

ExperimentConfig read_experiment(NodeReader& root, const SourceMap& sources, std::vector<ConfigError>* collected) {
  ExperimentConfig config;
  Problems problems;
  Reader reader(root, sources, problems);
  visit(reader, config);
  for (const ConfigError& e : root.unknown_keys()) problems.add(e.key(), e);
  if (collected == nullptr) problems.throw_any();
  if (!problems.all().empty()) {
    collected->insert(collected->end(), problems.all().begin(), problems.all().end());
    config = fallback(std::move(config), sources);
  }
  for (const DatasetOnlyKey& only : dataset_only_keys(config.data)) {
    if (!only.set || only.reader == config.data.dataset) continue;
    const std::string key = std::string("data.") + only.key;
    spdlog::warn("{}: {}: only data.dataset: {} reads it; {} ignores it", sources.at(key).str(), key, word(only.reader),
                 word(config.data.dataset));
  }
  if (config.data.root.empty()) config.data.root = default_data_root(config.data.dataset);
  return config;
}

}  // namespace gputrain::config::detail
