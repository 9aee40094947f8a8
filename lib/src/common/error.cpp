#include "gputrain/common/error.h"

#include <fmt/format.h>

#include "gputrain/common/strings.h"

namespace gputrain {

std::string SourceMark::str() const {
  if (origin.empty()) return "";
  if (line <= 0) return origin;
  return fmt::format("{}:{}:{}", origin, line, column);
}

namespace {
// Origins, keys and values come from files and argv, so the message is made printable.
std::string config_message(const SourceMark& where, const std::string& key, std::string_view problem) {
  const std::string at = where.str();
  if (at.empty()) return printable(fmt::format("{}: {}", key, problem));
  return printable(fmt::format("{}: {}: {}", at, key, problem));
}
}  // namespace

ConfigError::ConfigError(SourceMark where, std::string key, std::string_view problem)
    : UserError(config_message(where, key, problem)),
      where_(std::move(where)),
      key_(std::move(key)),
      problem_(problem) {}

namespace detail {
void throw_internal(const char* file, int line, const std::string& message) {
  throw InternalError(fmt::format("internal error at {}:{}: {}", file, line, message));
}
}  // namespace detail

}  // namespace gputrain
