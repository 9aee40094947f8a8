#pragma once
#include <cstdint>
#include <string>

namespace gputrain::app {

// Console logging to stderr (colour on a terminal); stdout stays for what a
// command prints as its product (the config YAML, the info JSON).
void install_console_logging(const std::string& level);

// Adds <run dir>/train.log to the default logger. If it cannot be written (a
// full disk), stderr gets one line naming the file and the cause.
void add_log_file(const std::string& path);

// One of several ranks: console lines carry "[rank N]", and every rank but 0
// logs warnings and errors only (rank 0 speaks for the run).
void set_rank_logging(int64_t rank);

}  // namespace gputrain::app
