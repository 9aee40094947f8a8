#pragma once
// Name -> value tables for config choices (models, activations, optimizers,
// schedules, losses), so each list of names is written once and a miss always
// reads the same way as the config loader's.
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain {

template <typename T>
using ChoiceTable = std::vector<std::pair<std::string, T>>;

// The value named `name`, or a ConfigError on `key` listing the names. The
// error has no file position: the loader has already checked the names it
// read, so a miss here means a config built in code.
template <typename T>
const T& lookup_choice(const ChoiceTable<T>& table, const std::string& name, const std::string& key) {
  std::vector<std::string> names;
  for (const auto& [candidate, value] : table) {
    if (candidate == name) return value;
    names.push_back(candidate);
  }
  throw ConfigError(SourceMark{}, key, unknown_choice(name, names));
}

}  // namespace gputrain
