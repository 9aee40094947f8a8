#pragma once
#include <set>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/config/config_errors.h"
#include "node_reader.h"

namespace gputrain::config::detail {

// The problems found while reading one experiment, and the keys they blame.
class Problems {
 public:
  void add(const std::string& key, const ConfigError& problem);
  bool blames(const std::string& key) const { return keys_.count(key) > 0; }
  // One problem is thrown as it is; several as one ConfigErrors.
  void throw_any() const;
  const std::vector<ConfigError>& all() const { return all_; }

 private:
  std::vector<ConfigError> all_;
  std::set<std::string> keys_;
};

// The experiment from the document's root mapping, every key checked as schema.h
// declares it. Throws every problem found at once (ConfigErrors when more than
// one); with `collected`, adds them there instead and returns a config that
// breaks no rule across keys (a key at fault at its default, see read.cpp's fallback).
ExperimentConfig read_experiment(NodeReader& root, const SourceMap& sources,
                                 std::vector<ConfigError>* collected = nullptr);

}  // namespace gputrain::config::detail
