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
  // GPUTRAIN_TEST_PAUSE_CHECKPOINT_WRITE: seconds every checkpoint write
  // pauses half-way, for tests that kill the process in the middle of one.
  std::optional<std::string> test_pause_checkpoint_write;
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
  std::string config;  // required unless `resume` is a path
  std::vector<std::string> overrides;
  std::string output;  // overrides output.dir when set
  std::string resume;  // "", "auto" or a checkpoint path
  Environment env;
};
int run_train(const TrainArgs& args);

struct TestArgs {
  std::string config;
  std::string checkpoint;
  std::vector<std::string> overrides;
  Environment env;
};
int run_test(const TestArgs& args);

struct ExportArgs {
  std::string checkpoint;  // a checkpoint or a model.pt
  std::string out;
};
int run_export(const ExportArgs& args);

}  // namespace gputrain::app
