#pragma once
// One Args struct and one run_x function per subcommand; main.cpp fills the
// structs from argv and the environment, the functions call into lib/.
#include <optional>
#include <string>
#include <vector>

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

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string output;  // overrides output.dir when set
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

}  // namespace gputrain::app
