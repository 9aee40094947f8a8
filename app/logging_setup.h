#pragma once
#include <string>

namespace gputrain::app {

// Console logging to stderr (colour on a terminal); stdout stays for what a
// command prints as its product (the config YAML, the info JSON).
void install_console_logging(const std::string& level);

// Adds <run dir>/train.log to the default logger.
void add_log_file(const std::string& path);

}  // namespace gputrain::app
