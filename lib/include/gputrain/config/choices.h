#pragma once
// One table per choice key: the words a user may write and the enum value
// each stands for. It parses, prints back, and lists the allowed words in
// errors and in the key table, so each list is written once.
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain::config {

template <typename E>
struct Choice {
  const char* word;
  E value;
};

template <typename E, std::size_t N>
struct ChoiceTable {
  std::array<Choice<E>, N> entries;

  std::optional<E> parse(std::string_view word) const {
    for (const auto& entry : entries) {
      if (word == entry.word) return entry.value;
    }
    return std::nullopt;
  }
  // Every enum value has a row, so this never misses.
  const char* word(E value) const {
    for (const auto& entry : entries) {
      if (entry.value == value) return entry.word;
    }
    return "?";
  }
  std::vector<std::string> words() const {
    std::vector<std::string> out;
    for (const auto& entry : entries) out.emplace_back(entry.word);
    return out;
  }
};

// The word of a choice value, through the table that `choices(E)` (declared
// beside each enum) returns.
template <typename E>
const char* word(E value) {
  return choices(value).word(value);
}

// Prints a choice as its word, so test failures and logs read as the YAML does.
template <typename E, typename = decltype(choices(std::declval<E>()))>
std::ostream& operator<<(std::ostream& out, E value) {
  return out << word(value);
}

// After a switch whose every case returns: a value outside the enum is a bug.
template <typename E>
[[noreturn]] void unhandled(E value) {
  throw InternalError(fmt::format("choice value {} has no case", static_cast<int>(value)));
}

}  // namespace gputrain::config
