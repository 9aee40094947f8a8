#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/config.h"

namespace gputrain::config {

// Reads an experiment file, applies `--set key=value` overrides in order and
// validates the result. Throws ConfigError (unknown key, wrong type, out of
// range; ConfigErrors for several) or UserError (missing file, malformed
// YAML), each naming where. With `problems` (`gputrain plan`, which lists
// every problem at once), the config's own problems are added there instead
// of thrown, and the config returned falls back where they are: a key at
// fault keeps its default, and a rule across keys that is broken holds again
// by the fewest keys set back to their defaults, so that the run's later
// parts can still be resolved. A file that cannot be read or parsed still throws.
LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                         std::vector<ConfigError>* problems = nullptr);

// Several experiment files, later over earlier (--config given more than
// once): maps merge key by key, lists and scalars replace. Each file may say
// `extends: base.yaml` (or a list), relative to itself: those files go under
// it. The SourceMap names the file, line and column of every value;
// `problems` as above.
LoadedConfig load_config(const std::vector<std::string>& paths, const std::vector<std::string>& overrides = {},
                         std::vector<ConfigError>* problems = nullptr);

// The experiment file's text as it runs on its own: as written, or for a file
// that extends others, the files merged into one document (gputrain configs).
std::string standalone_config_text(const std::string& path);

// The same from YAML text; `origin` names it in messages.
LoadedConfig load_config_text(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides = {},
                              std::vector<ConfigError>* problems = nullptr);

// The fully resolved config as YAML that load_config accepts unchanged.
std::string dump_config(const ExperimentConfig& config);

// Every key as a markdown table (key, default, values, meaning), from the
// declarations in schema.h; configs/README.md holds it (a test checks).
std::string key_table();

// Every key, its value and where the value came from: "file:line:col",
// "--set #N" or "default", as an aligned table (`gputrain config --explain`).
std::string explain_config(const LoadedConfig& loaded);

// Every leaf of dump_config by dotted key, its value as flow YAML
// ("model.hidden" -> "[16]"), for comparing two configs key by key.
std::map<std::string, std::string> flatten_config(const ExperimentConfig& config);

}  // namespace gputrain::config
