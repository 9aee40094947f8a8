#pragma once
// One Args struct and one run_x function per subcommand; main.cpp fills the
// structs from argv and the environment, the functions call into lib/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gputrain::app {

// What the process environment says, read once in main.cpp.
struct Environment {
  std::optional<std::string> cuda_visible_devices;
};

struct ConfigArgs {
  std::string config;
  std::vector<std::string> overrides;
};
int run_config(const ConfigArgs& args);

struct InfoArgs {
  bool json = false;
  Environment env;
};
int run_info(const InfoArgs& args);

// `datasets make-cifar` and `datasets make-idx`: write small learnable stand-ins.
struct DatasetsArgs {
  std::string format;  // "cifar" or "idx": which make-* subcommand ran
  std::string out;
  std::optional<int64_t> train;  // unset: the real set's size
  std::optional<int64_t> test;
  uint64_t seed = 0;
  bool gzip = false;  // idx only
};
// Adds `datasets` and its make-* subcommands to `app`, filling `args`.
CLI::App* add_datasets_command(CLI::App& app, DatasetsArgs& args);
int run_datasets(const DatasetsArgs& args);

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string output;  // overrides output.dir when set
  Environment env;
};
int run_train(const TrainArgs& args);

// `gputrain report RUN_DIR [--out FILE]`: the HTML report of a run, finished or not.
struct ReportArgs {
  std::string run_dir;
  std::string out;  // empty: RUN_DIR/report.html
};
int run_report(const ReportArgs& args);

struct TestArgs {
  std::string config;
  std::string checkpoint;
  std::vector<std::string> overrides;
  Environment env;
};
int run_test(const TestArgs& args);

}  // namespace gputrain::app
