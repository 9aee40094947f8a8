#pragma once
// A run logged to an MLflow tracking server through its REST API: the run
// made at the start with the config as params, the metrics of each log
// interval and epoch with their step, report.html, config.yaml and run.json
// as artifacts and the status at the end. A background thread sends; a step
// only queues. A server that cannot be reached is a warning: what was not
// sent is kept in the run directory (mlflow-pending.jsonl) and sent later by
// `gputrain report --mlflow RUN_DIR` (resend_to_mlflow).
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/report/run_info.h"
#include "gputrain/train/observer.h"

namespace gputrain::report {

// The server and the run's names: tracking.mlflow with its URI resolved.
struct MlflowTarget {
  std::string uri;  // http(s)://host:port, without a trailing '/'
  std::string experiment;
  std::string run_name;
  std::map<std::string, std::string> tags;
};

// The run's tracking.mlflow with its URI, else `env_uri` (MLFLOW_TRACKING_URI,
// read by app/); none when neither names a server. UserError for an
// environment URI that is not http(s)://.
std::optional<MlflowTarget> mlflow_target(const plan::RunPlan& run, const std::optional<std::string>& env_uri);

// How a run ended, as MLflow names it.
enum class MlflowStatus { kFinished, kFailed, kKilled };

struct MlflowLoggerOptions {
  std::size_t max_queued = 10000;        // records waiting to be sent; more go straight to the pending file
  std::chrono::seconds finish_wait{60};  // finish() waits at most this long for the sender, then keeps the rest
  long request_timeout_s = 10;           // one request, connecting included
};

class MlflowLogger : public train::TrainObserver {
 public:
  // Starts the sender, which makes the run (or continues the one an earlier
  // part of this run directory made: a resumed run), then logs `params`.
  // Writes <run_dir>/mlflow.json: the target and, once made, the run's id.
  MlflowLogger(const MlflowTarget& target, const std::filesystem::path& run_dir, const RunInfo& run,
               const std::map<std::string, std::string>& params, MlflowLoggerOptions options = {});
  ~MlflowLogger() override;
  MlflowLogger(const MlflowLogger&) = delete;
  MlflowLogger& operator=(const MlflowLogger&) = delete;

  void on_step(const train::StepMetrics& m) override;
  void on_epoch(const train::EpochMetrics& m) override;

  // Queues the artifacts (files of the run directory) and the status, and
  // waits for the sender (at most options.finish_wait). Never throws.
  void finish(MlflowStatus status, const std::vector<std::filesystem::path>& artifacts);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

// What `gputrain report --mlflow` sent.
struct MlflowResent {
  std::string run_url;  // the run in the server's web UI
  std::size_t records = 0;
};

// Sends what a run directory's mlflow-pending.jsonl holds, making the run
// first when the server was never reached. UserError when the directory has
// no MLflow run or nothing waits; Error (exit 1) when the server still cannot
// be reached or refuses, with what is left kept.
MlflowResent resend_to_mlflow(const std::filesystem::path& run_dir);

}  // namespace gputrain::report
