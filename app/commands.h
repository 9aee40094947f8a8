#pragma once
// One Args struct and one run_x function per subcommand; run_cli (cli.cpp)
// fills the structs from argv and the environment, the functions call into lib/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/checkpoint/resume.h"
#include "gputrain/common/files.h"
#include "gputrain/device/kernel_caches.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/run_plan.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace gputrain::app {

// The whole command line: what gputrain's main() runs. Tests inject seams
// through the arguments after argv (gputrain itself passes none).
int run_cli(int argc, char** argv, const WriteHooks& checkpoint_write_hooks = {});

// One environment variable as found: its name says where a bad value came from.
struct EnvValue {
  std::string name;
  std::string value;
};

// What the process environment says, read once in run_cli.
struct Environment {
  std::optional<std::string> cuda_visible_devices;
  // A launcher's rank variables: torchrun's RANK, LOCAL_RANK and WORLD_SIZE,
  // else Slurm's SLURM_PROCID, SLURM_LOCALID and SLURM_NTASKS; MASTER_ADDR and
  // MASTER_PORT either way; torchrun's store and restart count.
  std::optional<EnvValue> rank;
  std::optional<EnvValue> local_rank;
  std::optional<EnvValue> world_size;
  std::optional<EnvValue> master_addr;
  std::optional<EnvValue> master_port;
  std::optional<EnvValue> agent_store;          // TORCHELASTIC_USE_AGENT_STORE
  std::optional<EnvValue> restart_count;        // TORCHELASTIC_RESTART_COUNT
  std::optional<EnvValue> slurm_restart_count;  // SLURM_RESTART_COUNT: a requeued job's
  // GPUTRAIN_RESOLVED_BATCH=global,accumulation,test: the batch `train --nproc`
  // measured for its workers (data.batch_size: auto), so that all run the same.
  std::optional<EnvValue> resolved_batch;
  std::optional<std::string> mlflow_tracking_uri;  // MLFLOW_TRACKING_URI: tracking.mlflow.uri when the config has none
  device::KernelCacheEnv kernel_caches;            // HOME, XDG_CACHE_HOME and the caches' own variables
  std::vector<std::string> all;                    // KEY=VALUE, for the workers `train --nproc` starts
};

// -c/--config, given once or more: the experiment files, later over earlier.
using ConfigFiles = std::vector<std::string>;

// An option's check for a whole number in [minimum, maximum]: says "not a
// number" for text, and the bound broken for a number.
CLI::Validator whole_number(int64_t minimum, int64_t maximum);

// -c/--config FILE and --set KEY=VALUE..., as every command that reads an experiment file takes them.
void add_config_options(CLI::App* command, ConfigFiles& config, std::vector<std::string>& overrides,
                        bool required = true);

// What a launcher (torchrun, srun, --nproc's parent) told this process; a
// world of 1 when nothing did. Throws UserError for values no launcher gives.
parallel::LaunchInfo launch_info(const Environment& env);

// The restart counts a launcher set (train.resume: auto reads them); `launch`
// is launch_info(env).
checkpoint::Restarts restarts(const Environment& env, const parallel::LaunchInfo& launch);

inline constexpr const char* kResolvedBatchVariable = "GPUTRAIN_RESOLVED_BATCH";

// The batch a launcher resolved for this worker (GPUTRAIN_RESOLVED_BATCH), and
// the variable that passes `batch` on. Throws UserError for a malformed value.
std::optional<checkpoint::ResolvedBatch> launcher_batch(const Environment& env);
std::string launcher_batch_variable(const checkpoint::ResolvedBatch& batch);

struct ConfigArgs {
  ConfigFiles config;
  std::vector<std::string> overrides;
  std::string resume;  // "auto" or a checkpoint: the config train --resume would run with
  bool keys = false;
  bool explain = false;
};
int run_config(const ConfigArgs& args);

// `model`: the configured model's layers, output shapes, parameters and FLOPs.
struct ModelArgs {
  ConfigFiles config;
  std::vector<std::string> overrides;
};
int run_model(const ModelArgs& args);

// `plan`: what train would decide and every problem that would stop it.
struct PlanArgs {
  ConfigFiles config;
  std::vector<std::string> overrides;
  std::optional<int64_t> nproc;
  std::string resume;  // "auto" (--resume alone) or a checkpoint file: plan what train --resume would run
  bool json = false;
  Environment env;
};
CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
int run_plan(const PlanArgs& args);

struct InfoArgs {
  bool json = false;
  Environment env;
};
int run_info(const InfoArgs& args);

// `configs [NAME]`: the shipped experiment files, listed, or one printed.
struct ConfigsArgs {
  std::string name;  // empty: list them
};
CLI::App* add_configs_command(CLI::App& app, ConfigsArgs& args);
int run_configs(const ConfigsArgs& args);

// `datasets download`: fetch a public data set; `datasets make-cifar` and
// `datasets make-idx`: write small learnable stand-ins; `datasets export`:
// write the data set an experiment file names as .npy files.
struct DatasetsArgs {
  std::string format;   // "download", "cifar", "idx" or "export": which subcommand ran
  std::string dataset;  // download: fashion_mnist, mnist or cifar10
  std::string root;     // download: empty: the set's default folder
  // download: GPUTRAIN_DATASETS_MIRROR (a mirror's base URL), GPUTRAIN_DATASETS_CATALOG
  // (a file of URLs and checksums), CURL_CA_BUNDLE or else SSL_CERT_FILE (CA certificates)
  std::optional<std::string> mirror;
  std::optional<std::string> catalog;
  std::optional<std::string> ca_bundle;
  std::string out;
  ConfigFiles config;  // export only
  std::vector<std::string> overrides;
  std::optional<int64_t> train;  // unset: the real set's size
  std::optional<int64_t> test;
  uint64_t seed = 0;
  bool gzip = false;                // idx only
  bool force = false;               // overwrite an existing set
  std::string file_format = "npy";  // export: npy, png or jpeg
  int quality = 95;                 // export --format jpeg
};
// Adds `datasets` and its make-* subcommands to `app`, filling `args`.
CLI::App* add_datasets_command(CLI::App& app, DatasetsArgs& args);
int run_datasets(const DatasetsArgs& args);

struct TrainArgs {
  ConfigFiles config;  // required unless `resume` is a path
  std::vector<std::string> overrides;
  std::string output;            // overrides output.dir when set
  std::string resume;            // "", "auto" or a checkpoint path
  std::optional<int64_t> nproc;  // set: launch this many local workers instead of training
  int64_t max_restarts = 0;      // --nproc's: restarts of a failed group
  std::string log_level;         // passed on to those workers
  Environment env;
  WriteHooks checkpoint_write_hooks;  // tests' seam: none in gputrain
};
int run_train(const TrainArgs& args);

// `gputrain report RUN_DIR [--out FILE]`: the HTML report of a run, finished or not.
struct ReportArgs {
  std::string run_dir;
  std::string out;      // empty: RUN_DIR/report.html
  bool mlflow = false;  // send what the run kept for its MLflow server instead
};
int run_report(const ReportArgs& args);

// What test and predict share: saved weights and the config they were trained with.
struct SavedWeightsArgs {
  ConfigFiles config;
  std::string checkpoint;
  std::vector<std::string> overrides;
  std::string tta = "run";  // "run": train.tta's views of each image, averaged; "off": the image alone
  Environment env;
};
// Their run, from the front door for `purpose`, its device logged.
plan::RunPlan saved_weights_plan(plan::Purpose purpose, const std::string& command, const SavedWeightsArgs& args);

struct TestArgs : SavedWeightsArgs {};
int run_test(const TestArgs& args);

// `predict`: saved weights applied to the user's samples, one CSV row each.
struct PredictArgs : SavedWeightsArgs {
  std::string input;
  std::string out;     // empty: stdout
  bool force = false;  // replace an existing --out
};
int run_predict(const PredictArgs& args);

// `bench`: times the phases of a train step and the compute bound.
struct BenchArgs {
  Environment env;
  ConfigFiles config;
  std::vector<std::string> overrides;
  int64_t steps = 100;
  int64_t warmup = 10;
  int64_t profile = 0;  // steps recorded by LibTorch's profiler after the timed ones
  std::string profile_trace = "profile_trace.json";
  bool json = false;
  bool loader_only = false;
};
CLI::App* add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

struct SweepArgs {
  ConfigFiles config;
  std::vector<std::string> overrides;  // every run's
  std::string seeds;                   // "0..4" or "0,3,7"
  std::vector<std::string> vary;       // KEY=V1,V2,...
  bool json = false;
  std::string log_level;  // the runs'
};
CLI::App* add_sweep_command(CLI::App& app, SweepArgs& args);
int run_sweep(const SweepArgs& args);

struct ExportArgs {
  std::string checkpoint;  // a checkpoint or a model.pt
  std::string out;
  std::string weights;                // "live", "ema" or empty: the evaluated ones
  bool force = false;                 // replace an existing --out
  std::string format = "state_dict";  // or "onnx", "pytorch", "safetensors"
  // onnx, pytorch: the model's config (a checkpoint holds its own; a model.pt needs --config), with --set on top
  ConfigFiles config;
  std::vector<std::string> overrides;
  bool normalize_inputs = true;  // onnx, pytorch: the model starts with data.normalize
  WriteHooks write_hooks;        // tests' seam: none in gputrain
};
int run_export(const ExportArgs& args);

}  // namespace gputrain::app
