#pragma once
// Small string helpers shared by every module (std only).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gputrain {

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a
// plausible typo (distance above a third of the word's length, at least 2).
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "a, b or c"
std::string join_choices(const std::vector<std::string>& words);

// "unknown value 'sdg'; allowed: sgd, adam or adamw (did you mean 'sgd'?)"
std::string unknown_choice(std::string_view value, const std::vector<std::string>& allowed);

// "2GiB", "512 MiB", "1.5GB", "4096": bytes; nullopt when `text` is not a
// positive size (units B, KB/MB/GB/TB in powers of 1000, KiB/MiB/GiB/TiB of 1024).
std::optional<int64_t> parse_bytes(std::string_view text);

// "512 B", "3.5 KiB", "12.3 MiB", "2.00 GiB"; "unknown" for a negative count.
std::string bytes_text(int64_t bytes);

std::vector<std::string> split(std::string_view text, char separator);

std::string_view trim(std::string_view text);

// "1 epoch", "3 epochs", "2 classes": `noun` with an "s" ("es" after s or x) unless `count` is 1.
std::string count_of(int64_t count, std::string_view noun);

// Offset of the first byte that is not part of a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF included), or
// npos when the whole text is UTF-8.
std::size_t invalid_utf8(std::string_view text);

// `text` with bytes that are not UTF-8, and ASCII control characters, written
// as \xNN: paths and keys come from argv and files, and a message naming them
// must print (and pass through JSON or YAML) whatever bytes they hold.
std::string printable(std::string_view text);

}  // namespace gputrain
