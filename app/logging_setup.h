#pragma once
#include <cstdint>
#include <string>

namespace gputrain::app {

// Console logging to stderr (colour on a terminal); stdout stays for what a
// command prints as its product (the config YAML, the info JSON).
void install_console_logging(const std::string& level);

// Keeps the lines logged from now on (the last 10,000) for the log file
// add_log_file opens later: the run's start-up decisions (the resume choice,
// the data, the batch, the fast paths) are logged before its directory exists.
void keep_early_log();

// Adds <run dir>/train.log to the default logger, first writing into it the
// lines keep_early_log kept. If it cannot be written (a full disk), stderr
// gets one line naming the file and the cause.
void add_log_file(const std::string& path);

// Stops keeping lines for a log file this process will not open (a rank
// other than 0, the launcher of --nproc's workers).
void drop_early_log();

// One of several ranks: console lines carry "[rank N]", and every rank but 0
// logs warnings and errors only (rank 0 speaks for the run).
void set_rank_logging(int64_t rank);

}  // namespace gputrain::app
