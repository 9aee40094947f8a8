#include "gputrain/report/mlflow.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"
#include "gputrain/data/http.h"
#include "scalars.h"

namespace gputrain::report {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kStateFile = "mlflow.json";
constexpr const char* kPendingFile = "mlflow-pending.jsonl";
// MLflow's own limits on one log-batch request and on a param's value.
constexpr std::size_t kParamsPerBatch = 100;
constexpr std::size_t kMetricsPerBatch = 1000;
constexpr std::size_t kMaxParamValue = 6000;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_http(const std::string& uri) { return uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0; }

std::string percent_encoded(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

const char* status_word(MlflowStatus status) {
  switch (status) {
    case MlflowStatus::kFinished:
      return "FINISHED";
    case MlflowStatus::kFailed:
      return "FAILED";
    case MlflowStatus::kKilled:
      return "KILLED";
  }
  return "FAILED";
}

// The run's identity on the server, kept in mlflow.json so that a resumed run
// and `gputrain report --mlflow` continue the same MLflow run.
struct RunState {
  MlflowTarget target;
  int64_t start_time = 0;
  std::string experiment_id;
  std::string run_id;
  std::string artifact_uri;

  json to_json() const {
    return {{"uri", target.uri},   {"experiment", target.experiment}, {"run_name", target.run_name},
            {"tags", target.tags}, {"start_time", start_time},        {"experiment_id", experiment_id},
            {"run_id", run_id},    {"artifact_uri", artifact_uri}};
  }
  static RunState from_json(const json& j) {
    RunState s;
    s.target.uri = j.at("uri").get<std::string>();
    s.target.experiment = j.at("experiment").get<std::string>();
    s.target.run_name = j.at("run_name").get<std::string>();
    s.target.tags = j.at("tags").get<std::map<std::string, std::string>>();
    s.start_time = j.at("start_time").get<int64_t>();
    s.experiment_id = j.value("experiment_id", "");
    s.run_id = j.value("run_id", "");
    s.artifact_uri = j.value("artifact_uri", "");
    return s;
  }
  void save(const fs::path& dir) const { write_atomically(dir / kStateFile, to_json().dump(2) + "\n"); }
  std::string url() const { return fmt::format("{}/#/experiments/{}/runs/{}", target.uri, experiment_id, run_id); }
};

std::optional<RunState> load_state(const fs::path& dir) {
  std::ifstream in(dir / kStateFile);
  if (!in) return std::nullopt;
  try {
    return RunState::from_json(json::parse(in));
  } catch (const json::exception& e) {
    throw UserError(
        fmt::format("{}: not an MLflow run record gputrain wrote: {}", (dir / kStateFile).string(), e.what()));
  }
}

// What a request came to: sent; the server down (not reached, or a 5xx: keep
// the record for later); or refused (a 4xx: the record itself is wrong).
struct Sent {
  enum Outcome { kOk, kDown, kRefused } outcome = kOk;
  std::string why;
  json body;
};

// The server's own words from an error answer ({"error_code", "message"}), else its text.
std::string server_message(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  return body.substr(0, 200);
}

// Sends one run's records: makes the run when it has none yet.
class Sender {
 public:
  Sender(RunState& state, fs::path dir, long timeout_s) : state_(state), dir_(std::move(dir)), timeout_s_(timeout_s) {}

  // The run on the server: made (its experiment too, when missing), or an
  // earlier part's set running again.
  Sent ensure_run() {
    if (!state_.run_id.empty()) {
      return call("POST", "runs/update", {{"run_id", state_.run_id}, {"status", "RUNNING"}});
    }
    Sent found =
        call("GET", "experiments/get-by-name?experiment_name=" + percent_encoded(state_.target.experiment), nullptr);
    if (found.outcome == Sent::kOk) {
      state_.experiment_id = found.body["experiment"]["experiment_id"].get<std::string>();
    } else if (found.outcome == Sent::kRefused) {  // RESOURCE_DOES_NOT_EXIST
      Sent made = call("POST", "experiments/create", {{"name", state_.target.experiment}});
      if (made.outcome != Sent::kOk) return made;
      state_.experiment_id = made.body["experiment_id"].get<std::string>();
    } else {
      return found;
    }
    json tags = json::array();
    for (const auto& [key, value] : state_.target.tags) tags.push_back({{"key", key}, {"value", value}});
    Sent run = call("POST", "runs/create",
                    {{"experiment_id", state_.experiment_id},
                     {"run_name", state_.target.run_name},
                     {"start_time", state_.start_time},
                     {"tags", tags}});
    if (run.outcome != Sent::kOk) return run;
    state_.run_id = run.body["run"]["info"]["run_id"].get<std::string>();
    state_.artifact_uri = run.body["run"]["info"].value("artifact_uri", "");
    state_.save(dir_);
    return run;
  }

  Sent send(const json& record) {
    const std::string kind = record.at("kind").get<std::string>();
    if (kind == "params") return send_params(record.at("params"));
    if (kind == "metrics") return send_metrics(record.at("metrics"));
    if (kind == "artifact") return send_artifact(record.at("path").get<std::string>());
    return call("POST", "runs/update",
                {{"run_id", state_.run_id}, {"status", record.at("status")}, {"end_time", record.at("end_time")}});
  }

 private:
  Sent send_params(const json& params) {
    json batch = json::array();
    for (auto it = params.begin(); it != params.end(); ++it) {
      std::string value = it.value().get<std::string>();
      if (value.size() > kMaxParamValue) value = value.substr(0, kMaxParamValue - 3) + "...";
      batch.push_back({{"key", it.key()}, {"value", value}});
      if (batch.size() == kParamsPerBatch || std::next(it) == params.end()) {
        Sent sent = call("POST", "runs/log-batch", {{"run_id", state_.run_id}, {"params", batch}});
        if (sent.outcome != Sent::kOk) return sent;
        batch = json::array();
      }
    }
    return {};
  }
  Sent send_metrics(const json& metrics) {
    for (std::size_t from = 0; from < metrics.size(); from += kMetricsPerBatch) {
      const std::size_t to = std::min(metrics.size(), from + kMetricsPerBatch);
      const json part(metrics.begin() + static_cast<std::ptrdiff_t>(from),
                      metrics.begin() + static_cast<std::ptrdiff_t>(to));
      Sent sent = call("POST", "runs/log-batch", {{"run_id", state_.run_id}, {"metrics", part}});
      if (sent.outcome != Sent::kOk) return sent;
    }
    return {};
  }
  // Through the server's artifact proxy (mlflow server --serve-artifacts, the default since MLflow 2).
  Sent send_artifact(const std::string& name) {
    std::string where = state_.artifact_uri;
    if (where.rfind("mlflow-artifacts://", 0) == 0) {
      where = where.substr(std::string("mlflow-artifacts://").size());
      where = where.substr(std::min(where.size(), where.find('/')));
    } else if (where.rfind("mlflow-artifacts:", 0) == 0) {
      where = where.substr(std::string("mlflow-artifacts:").size());
    } else {
      return {Sent::kRefused,
              fmt::format("the server keeps the run's artifacts at {}, which it does not serve; start it with "
                          "--serve-artifacts (the default) to receive them",
                          where),
              {}};
    }
    while (!where.empty() && where.front() == '/') where.erase(0, 1);
    std::ifstream in(dir_ / name, std::ios::binary);
    if (!in) return {Sent::kRefused, fmt::format("{} cannot be read", (dir_ / name).string()), {}};
    std::ostringstream bytes;
    bytes << in.rdbuf();
    data::HttpRequest request{
        "PUT",
        fmt::format("{}/api/2.0/mlflow-artifacts/artifacts/{}/{}", state_.target.uri, where, percent_encoded(name)),
        "application/octet-stream", bytes.str(), timeout_s_};
    return judge(data::http_request(request));
  }

  Sent call(const char* method, const std::string& endpoint, const json& body) {
    data::HttpRequest request{method, fmt::format("{}/api/2.0/mlflow/{}", state_.target.uri, endpoint),
                              body.is_null() ? "" : "application/json", body.is_null() ? "" : body.dump(), timeout_s_};
    return judge(data::http_request(request));
  }

  static Sent judge(const data::HttpResponse& response) {
    if (response.status == 0) return {Sent::kDown, response.error, {}};
    if (response.status >= 500) {
      return {Sent::kDown, fmt::format("HTTP {}: {}", response.status, server_message(response.body)), {}};
    }
    if (response.status >= 400) {
      return {Sent::kRefused, fmt::format("HTTP {}: {}", response.status, server_message(response.body)), {}};
    }
    json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) body = json::object();
    return {Sent::kOk, "", std::move(body)};
  }

  RunState& state_;
  fs::path dir_;
  long timeout_s_;
};

// The records in `lines`, as mlflow-pending.jsonl holds them, one JSON object a line.
std::vector<json> read_pending(const fs::path& path) {
  std::vector<json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    // A line cut short by a crash mid-append is the only kind that does not parse.
    if (!record.is_discarded()) records.push_back(std::move(record));
  }
  return records;
}

// Adjacent metrics records as one, so that a log-batch carries many.
std::vector<json> coalesced(std::deque<json> records) {
  std::vector<json> out;
  for (json& record : records) {
    if (!out.empty() && record["kind"] == "metrics" && out.back()["kind"] == "metrics" &&
        out.back()["metrics"].size() + record["metrics"].size() <= kMetricsPerBatch) {
      for (json& metric : record["metrics"]) out.back()["metrics"].push_back(std::move(metric));
    } else {
      out.push_back(std::move(record));
    }
  }
  return out;
}

}  // namespace

std::optional<MlflowTarget> mlflow_target(const plan::RunPlan& run, const std::optional<std::string>& env_uri) {
  const config::MlflowConfig& c = run.outputs.mlflow;
  std::string uri = c.uri;
  if (uri.empty() && env_uri && !env_uri->empty()) {
    uri = *env_uri;
    if (!is_http(uri)) {
      throw UserError(fmt::format(
          "MLFLOW_TRACKING_URI={}: not an http(s):// address; gputrain speaks the tracking server's REST API (start "
          "one with `mlflow server`): set it to the server's address, or unset it to train without tracking",
          uri));
    }
  }
  if (uri.empty()) return std::nullopt;
  while (uri.back() == '/') uri.pop_back();
  return MlflowTarget{uri, c.experiment, c.run_name.empty() ? run.name : c.run_name, c.tags};
}

struct MlflowLogger::State {
  RunState run;
  fs::path dir;
  MlflowLoggerOptions options;
  bool labeled = true;
  bool fp16 = false;

  std::mutex mutex;  // guards the queue and the flags
  std::condition_variable wake;
  std::deque<json> queue;
  bool closing = false;
  std::chrono::steady_clock::time_point deadline;
  std::mutex file_mutex;  // the pending file: the sender and a full queue's producer append
  std::size_t kept = 0;
  std::thread thread;

  void push(json record) {
    {
      const std::lock_guard<std::mutex> lock(mutex);
      if (queue.size() < options.max_queued) {
        queue.push_back(std::move(record));
        wake.notify_one();
        return;
      }
    }
    keep(record);  // the server is slower than the run: the record waits on disk rather than in memory
  }

  void keep(const json& record) {
    const std::lock_guard<std::mutex> lock(file_mutex);
    std::ofstream out(dir / kPendingFile, std::ios::app);
    out << record.dump() << '\n';
    ++kept;
  }

  void loop() {
    Sender sender(run, dir, options.request_timeout_s);
    bool made = false;
    bool down = false;
    const auto go_down = [&](const std::string& why) {
      down = true;
      spdlog::warn(
          "MLflow at {}: {}; training goes on, and what is not sent is kept in {}: send it with `gputrain report "
          "--mlflow {}`",
          run.target.uri, why, (dir / kPendingFile).string(), dir.string());
    };
    while (true) {
      std::deque<json> taken;
      bool late = false;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return !queue.empty() || closing; });
        if (queue.empty()) return;
        taken.swap(queue);
        late = closing && std::chrono::steady_clock::now() > deadline;
      }
      if (late && !down) go_down(fmt::format("not all sent within {} s of the run's end", options.finish_wait.count()));
      for (const json& record : coalesced(std::move(taken))) {
        if (!down && !made) {
          const Sent sent = sender.ensure_run();
          if (sent.outcome == Sent::kOk) {
            made = true;
            spdlog::info("MLflow run: {}", run.url());
          } else {
            go_down(fmt::format("cannot make the run ({})", sent.why));
          }
        }
        if (down) {
          keep(record);
          continue;
        }
        const Sent sent = sender.send(record);
        if (sent.outcome == Sent::kDown) {
          go_down(sent.why);
          keep(record);
        } else if (sent.outcome == Sent::kRefused) {
          spdlog::warn("MLflow at {} refused the run's {} ({}); left out", run.target.uri,
                       record["kind"].get<std::string>(), sent.why);
        }
      }
    }
  }
};

MlflowLogger::MlflowLogger(const MlflowTarget& target, const fs::path& run_dir, const RunInfo& info,
                           const std::map<std::string, std::string>& params, MlflowLoggerOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.dir = run_dir;
  s.options = options;
  s.labeled = info.task != Task::kUnlabeled;
  s.fp16 = info.amp == config::AmpMode::kFp16;
  // A resumed run continues the MLflow run its first part made, on the same server and experiment.
  const std::optional<RunState> earlier = load_state(run_dir);
  if (earlier && earlier->target.uri == target.uri && earlier->target.experiment == target.experiment) {
    s.run = *earlier;
  } else {
    s.run.target = target;
    s.run.start_time = now_ms();
  }
  s.run.save(run_dir);
  json all = json::object();
  for (const auto& [key, value] : params) all[key] = value;
  s.queue.push_back({{"kind", "params"}, {"params", all}});
  s.thread = std::thread([&s] { s.loop(); });
}

MlflowLogger::~MlflowLogger() {
  State& s = *state_;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.closing) s.deadline = std::chrono::steady_clock::now() + s.options.finish_wait;
    s.closing = true;
  }
  s.wake.notify_one();
  if (s.thread.joinable()) s.thread.join();
}

namespace {
json metrics_record(const std::vector<Scalar>& scalars, int64_t step) {
  json metrics = json::array();
  const int64_t at = now_ms();
  for (const auto& [key, value] : scalars) {
    if (!std::isfinite(value)) continue;  // JSON has no NaN; MLflow would refuse the whole batch
    metrics.push_back({{"key", key}, {"value", value}, {"timestamp", at}, {"step", step}});
  }
  return {{"kind", "metrics"}, {"metrics", metrics}};
}
}  // namespace

void MlflowLogger::on_step(const train::StepMetrics& m) {
  state_->push(metrics_record(detail::step_scalars(m, state_->labeled, state_->fp16), m.step));
}

void MlflowLogger::on_epoch(const train::EpochMetrics& m) {
  // The axis TensorBoard uses: the step, or the epoch for forward-only runs.
  state_->push(
      metrics_record(detail::epoch_scalars(m, state_->labeled, state_->fp16), state_->labeled ? m.step : m.epoch));
}

void MlflowLogger::finish(MlflowStatus status, const std::vector<fs::path>& artifacts) {
  State& s = *state_;
  try {
    for (const fs::path& artifact : artifacts) {
      if (fs::exists(artifact)) s.push({{"kind", "artifact"}, {"path", artifact.lexically_relative(s.dir).string()}});
    }
    s.push({{"kind", "end"}, {"status", status_word(status)}, {"end_time", now_ms()}});
    {
      const std::lock_guard<std::mutex> lock(s.mutex);
      s.closing = true;
      s.deadline = std::chrono::steady_clock::now() + s.options.finish_wait;
    }
    s.wake.notify_one();
    if (s.thread.joinable()) s.thread.join();
    if (s.kept > 0) {
      spdlog::warn("MLflow: {} records wait in {}; send them with `gputrain report --mlflow {}`", s.kept,
                   (s.dir / kPendingFile).string(), s.dir.string());
    }
  } catch (const std::exception& e) {
    spdlog::warn("MLflow: the run's end could not be logged: {}", e.what());
  }
}

MlflowResent resend_to_mlflow(const fs::path& run_dir) {
  std::optional<RunState> state = load_state(run_dir);
  if (!state) {
    throw UserError(
        fmt::format("{}: no {} here; a run logs to MLflow when tracking.mlflow.uri (or "
                    "MLFLOW_TRACKING_URI) names a server",
                    run_dir.string(), kStateFile));
  }
  const fs::path pending = run_dir / kPendingFile;
  std::vector<json> records = read_pending(pending);
  if (records.empty()) {
    throw UserError(fmt::format("{}: nothing waits to be sent to MLflow (no {}); the run is at {}", run_dir.string(),
                                kPendingFile, state->run_id.empty() ? state->target.uri : state->url()));
  }
  Sender sender(*state, run_dir, MlflowLoggerOptions{}.request_timeout_s);
  const auto fail = [&](std::size_t from, const std::string& why) {
    std::string left;
    for (std::size_t i = from; i < records.size(); ++i) left += records[i].dump() + "\n";
    write_atomically(pending, left);
    throw Error(ExitCode::kRuntime,
                fmt::format("MLflow at {}: {}; {} of {} records still wait in {}", state->target.uri, why,
                            records.size() - from, records.size(), pending.string()));
  };
  if (state->run_id.empty()) {
    const Sent made = sender.ensure_run();
    if (made.outcome != Sent::kOk) fail(0, fmt::format("cannot make the run ({})", made.why));
  }
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Sent sent = sender.send(records[i]);
    if (sent.outcome == Sent::kDown) fail(i, sent.why);
    if (sent.outcome == Sent::kRefused) {
      spdlog::warn("MLflow refused the run's {} ({}); left out", records[i]["kind"].get<std::string>(), sent.why);
    }
  }
  fs::remove(pending);
  return {state->url(), records.size()};
}

}  // namespace gputrain::report
