#pragma once
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain::config {

// Every problem of one experiment at once, so that one run lists all a user
// has to fix. what(): one ConfigError's message a line; where() and key() are
// the first's, so a caller of ConfigError sees the first problem's place.
class ConfigErrors : public ConfigError {
 public:
  explicit ConfigErrors(std::vector<ConfigError> all) : ConfigError(all.at(0)), all_(std::move(all)) {
    for (const ConfigError& e : all_) message_ += (message_.empty() ? "" : "\n") + std::string(e.what());
  }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::vector<ConfigError>& all() const { return all_; }

 private:
  std::vector<ConfigError> all_;
  std::string message_;
};

// Runs `part` and lists what it refuses in `problems` instead of throwing,
// each of a ConfigErrors on its own line: for reports of every problem at
// once (`gputrain plan`). False when it refused.
template <class Part>
bool collect_refusal(std::vector<std::string>& problems, Part&& part) {
  try {
    part();
    return true;
  } catch (const ConfigErrors& e) {
    for (const ConfigError& one : e.all()) problems.emplace_back(one.what());
  } catch (const Error& e) {
    problems.emplace_back(e.what());
  }
  return false;
}

}  // namespace gputrain::config
