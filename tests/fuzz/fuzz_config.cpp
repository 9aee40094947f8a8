// libFuzzer target: the experiment-file loader with --set overrides.
// Input: YAML text, optionally followed by a NUL byte and overrides, one per
// line ("data:\n  batch_size: 4\n\0train.epochs=2\nseed=3"). Every input must
// load or throw a gputrain::Error; a config that loads must dump to YAML that
// loads back to the same config, since that dump is the run's config.yaml.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/load.h"

namespace {

[[noreturn]] void fail(const char* problem, const std::string& detail) {
  std::fprintf(stderr, "fuzz_config: %s\n%s\n", problem, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace gputrain;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  std::vector<std::string> overrides;
  if (nul != std::string::npos) overrides = split(std::string_view(input).substr(nul + 1), '\n');
  config::ExperimentConfig first;
  try {
    first = config::load_config_text(input.substr(0, nul), "fuzz.yaml", overrides).config;
  } catch (const Error&) {
    return 0;  // a typed error is the expected answer to bad input
  }
  const std::string dumped = config::dump_config(first);
  config::ExperimentConfig second;
  try {
    second = config::load_config_text(dumped, "config.yaml").config;
  } catch (const Error& e) {
    fail("the dump of a valid config does not load back", std::string(e.what()) + "\n--- dump:\n" + dumped);
  }
  // Numbers print exactly, so equal dumps mean equal values; the free-text
  // strings are compared byte for byte, since the emitter may rewrite bytes.
  const std::string again = config::dump_config(second);
  if (again != dumped) fail("the dump changes when loaded back", "--- first:\n" + dumped + "--- second:\n" + again);
  if (first.data.root != second.data.root || first.checkpoint.dir != second.checkpoint.dir ||
      first.output.dir != second.output.dir) {
    fail("a path changes when written to config.yaml and read back", dumped);
  }
  return 0;
}
