// tracking.mlflow against a real `mlflow server` (the venv's, pinned in scripts/env.sh) on a free loopback
// port with a SQLite store, read back with MLflow's own Python client (tests/report/mlflow_read.py).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gputrain/data/http.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path mlflow_program() { return venv_python().parent_path() / "mlflow"; }

// `mlflow server` in a process group of its own: it runs its web server as a
// child, which a kill of the group stops too.
class MlflowServer {
 public:
  MlflowServer(const fs::path& store, int port) : uri_(fmt::format("http://127.0.0.1:{}", port)) {
    fs::create_directories(store);
    process_ = std::make_unique<GputrainProcess>(
        std::vector<std::string>{"server", "--host", "127.0.0.1", "--port", std::to_string(port), "--backend-store-uri",
                                 "sqlite:///" + (store / "mlflow.db").string(), "--artifacts-destination",
                                 (store / "artifacts").string(), "--workers", "1"},
        std::map<std::string, std::string>{}, store.string(), [] { setpgid(0, 0); }, mlflow_program().string());
    data::HttpRequest health;
    health.url = uri_ + "/health";
    up_ = wait_until([&] { return data::http_request(health).status == 200; }, std::chrono::seconds(120));
  }
  ~MlflowServer() { kill(); }
  MlflowServer(const MlflowServer&) = delete;
  MlflowServer& operator=(const MlflowServer&) = delete;

  bool up() const { return up_; }
  const std::string& uri() const { return uri_; }
  std::string log() const { return process_->err_so_far(); }
  void kill() {
    if (!process_) return;
    ::kill(-process_->pid(), SIGKILL);
    process_->wait();
    process_.reset();
  }

 private:
  std::string uri_;
  std::unique_ptr<GputrainProcess> process_;
  bool up_ = false;
};

// One server for the tests that need nothing special of it (each its own experiment): starting one takes seconds.
MlflowServer& shared_server() {
  static TempDir store("gputrain-mlflow");
  static MlflowServer server(store.path(), free_port());
  return server;
}

// The experiment's runs as MLflow's client reads them.
json read_back(const std::string& uri, const std::string& experiment) {
  GputrainProcess reader({(fs::path(kSourceDir) / "tests/report/mlflow_read.py").string(), uri, experiment}, {},
                         kSourceDir, {}, venv_python().string());
  const ProcessResult r = reader.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out.substr(r.out.find('{')))["runs"];
}

std::string config(const std::string& uri, const std::string& experiment, int epochs, int samples = 64) {
  return fmt::format(R"(
name: tracked
seed: 1
device: cpu
data: {{dataset: synthetic, samples: {}, test_samples: 32, features: 6, classes: 3, batch_size: 16, num_workers: 0,
       pin_memory: false}}
model: {{name: mlp, hidden: [8]}}
optim: {{name: sgd, lr: 0.1}}
train: {{epochs: {}, log_every: 2, tensorboard: false}}
checkpoint: {{every: 1}}
tracking: {{mlflow: {{uri: "{}", experiment: {}, run_name: first, tags: {{team: vision}}}}}}
)",
                     samples, epochs, uri, experiment);
}

// The epoch records of a run's metrics.jsonl.
std::vector<json> epochs_of(const fs::path& run_dir) {
  std::vector<json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    json record = json::parse(line);
    if (record.value("kind", "") == "epoch") out.push_back(record);
  }
  return out;
}

class MlflowTracking : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(mlflow_program())) GTEST_SKIP() << mlflow_program() << " is missing: run scripts/setup.sh --tests";
  }
  TempDir dir_;
};

TEST_F(MlflowTracking, ARunIsReadBackByMlflowsOwnClient) {
  MlflowServer& server = shared_server();
  ASSERT_TRUE(server.up()) << server.log();
  const fs::path file = write_text(dir_ / "t.yaml", config(server.uri(), "gputrain-tests", 2));
  const ProcessResult r = run_gputrain({"train", "--config", file.string(), "--output", (dir_ / "runs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("[warning] MLflow"), std::string::npos) << r.err;
  const json runs = read_back(server.uri(), "gputrain-tests");
  ASSERT_EQ(runs.size(), 1u) << runs;
  const json& run = runs[0];
  EXPECT_EQ(run["name"], "first");
  EXPECT_EQ(run["status"], "FINISHED");
  EXPECT_EQ(run["tags"]["team"], "vision");
  // The resolved config as params, by dotted key.
  EXPECT_EQ(run["params"]["data.batch_size"], "16");
  EXPECT_EQ(run["params"]["optim.lr"], "0.1");
  EXPECT_EQ(run["params"]["name"], "tracked");
  // Each epoch's figures at its step, as metrics.jsonl has them; the log intervals' too.
  const std::vector<json> epochs = epochs_of(dir_ / "runs" / "tracked");
  ASSERT_EQ(epochs.size(), 2u);
  ASSERT_EQ(run["metrics"]["train/loss"].size(), 2u) << run["metrics"];
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    const json& logged = run["metrics"]["train/loss"][i];
    EXPECT_EQ(logged[0].get<int64_t>(), epochs[i]["step"].get<int64_t>());
    // Sent as JSON numbers from the float the run computed: the same to float32's precision.
    EXPECT_NEAR(logged[1].get<double>(), epochs[i]["loss"].get<double>(),
                1e-6 * std::abs(epochs[i]["loss"].get<double>()));
  }
  EXPECT_TRUE(run["metrics"].contains("test/accuracy")) << run["metrics"];
  EXPECT_GE(run["metrics"]["train_step/loss"].size(), 4u) << run["metrics"];  // 4 steps an epoch, every 2nd logged
  EXPECT_EQ(run["artifacts"], json::array({"config.yaml", "report.html", "run.json"}));
  EXPECT_FALSE(fs::exists(dir_ / "runs" / "tracked" / "mlflow-pending.jsonl"));
}

TEST_F(MlflowTracking, AWrongUriIsAWarningAndReportSendsTheRestLater) {
  const int port = free_port();  // nothing listens there yet
  const fs::path file = write_text(dir_ / "t.yaml", config(fmt::format("http://127.0.0.1:{}", port), "later", 2));
  const ProcessResult r = run_gputrain({"train", "--config", file.string(), "--output", (dir_ / "runs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("training goes on, and what is not sent is kept in"), std::string::npos) << r.err;
  const fs::path run_dir = dir_ / "runs" / "tracked";
  ASSERT_TRUE(fs::exists(run_dir / "mlflow-pending.jsonl"));
  // Still down: report says so, exit 1, and keeps every record.
  const ProcessResult early = run_gputrain({"report", "--mlflow", run_dir.string()});
  EXPECT_EQ(early.exit_code, 1) << early.err;
  ASSERT_TRUE(fs::exists(run_dir / "mlflow-pending.jsonl"));

  MlflowServer server(dir_ / "store", port);
  ASSERT_TRUE(server.up()) << server.log();
  const ProcessResult sent = run_gputrain({"report", "--mlflow", run_dir.string()});
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_NE(sent.out.find("/runs/"), std::string::npos) << sent.out;
  EXPECT_FALSE(fs::exists(run_dir / "mlflow-pending.jsonl"));
  const json runs = read_back(server.uri(), "later");
  ASSERT_EQ(runs.size(), 1u) << runs;
  EXPECT_EQ(runs[0]["status"], "FINISHED");
  EXPECT_EQ(runs[0]["metrics"]["train/loss"].size(), 2u) << runs[0];
  EXPECT_EQ(runs[0]["params"]["data.batch_size"], "16");
  EXPECT_EQ(runs[0]["artifacts"].size(), 3u) << runs[0];
  // Nothing left: a second report is told so (exit 2).
  EXPECT_EQ(run_gputrain({"report", "--mlflow", run_dir.string()}).exit_code, 2);
}

TEST_F(MlflowTracking, ANonHttpUriIsRefusedBeforeTheRunStarts) {
  const fs::path file = write_text(dir_ / "t.yaml", config("file:///tmp/mlruns", "x", 1));
  const ProcessResult r = run_gputrain({"train", "--config", file.string(), "--output", (dir_ / "runs").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("t.yaml:11:26: tracking.mlflow.uri: 'file:///tmp/mlruns' is not an http(s):// address"),
            std::string::npos)
      << r.err;
  // From the environment: named as such, and also before anything is written.
  const fs::path plain =
      write_text(dir_ / "p.yaml", "name: p\ndevice: cpu\ndata: {dataset: synthetic}\nmodel: {name: mlp}\n");
  const ProcessResult env = run_gputrain({"train", "--config", plain.string(), "--output", (dir_ / "runs").string()},
                                         {{"MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"}});
  EXPECT_EQ(env.exit_code, 2) << env.err;
  EXPECT_NE(env.err.find("MLFLOW_TRACKING_URI=sqlite:///mlflow.db: not an http(s):// address"), std::string::npos)
      << env.err;
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// A run that fails (its loss no longer finite under train.on_nan: stop, exit 1)
// ends FAILED, with the epochs it finished logged.
TEST_F(MlflowTracking, ARunThatFailsEndsFailed) {
  MlflowServer& server = shared_server();
  ASSERT_TRUE(server.up()) << server.log();
  const fs::path file = write_text(dir_ / "t.yaml", config(server.uri(), "failed", 2));
  const ProcessResult r = run_gputrain({"train", "--config", file.string(), "--output", (dir_ / "runs").string(),
                                        "--set", "optim.lr=1e30", "--set", "train.on_nan=stop"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the loss is not finite"), std::string::npos) << r.err;
  const json runs = read_back(server.uri(), "failed");
  ASSERT_EQ(runs.size(), 1u) << runs;
  EXPECT_EQ(runs[0]["status"], "FAILED");
  EXPECT_EQ(runs[0]["params"]["optim.lr"], "1e+30") << runs[0]["params"];
}

// The server dies mid-run: the run goes on, keeps what it could not send, and
// a signal ends it KILLED; `report --mlflow` sends the rest once the server is back.
TEST_F(MlflowTracking, AServerKilledMidRunLeavesTheRestForReport) {
  const int port = free_port();
  auto server = std::make_unique<MlflowServer>(dir_ / "store", port);
  ASSERT_TRUE(server->up()) << server->log();
  const fs::path file = write_text(dir_ / "t.yaml", config(server->uri(), "killed", 100000, 256));
  const fs::path run_dir = dir_ / "runs" / "tracked";
  GputrainProcess train({"train", "--config", file.string(), "--output", (dir_ / "runs").string()});
  ASSERT_TRUE(wait_until([&] { return epochs_of(run_dir).size() >= 2; })) << train.err_so_far();
  server->kill();
  const std::size_t at_kill = epochs_of(run_dir).size();
  ASSERT_TRUE(wait_until([&] { return epochs_of(run_dir).size() >= at_kill + 2; })) << train.err_so_far();
  train.send(SIGINT);
  const ProcessResult r = train.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_NE(r.err.find("training goes on"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(run_dir / "mlflow-pending.jsonl"));

  server = std::make_unique<MlflowServer>(dir_ / "store", port);  // the same store, back up
  ASSERT_TRUE(server->up()) << server->log();
  const ProcessResult sent = run_gputrain({"report", "--mlflow", run_dir.string()});
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  const json runs = read_back(server->uri(), "killed");
  ASSERT_EQ(runs.size(), 1u) << runs;
  EXPECT_EQ(runs[0]["status"], "KILLED");
  // Every epoch the run finished, before and after the server died, once.
  EXPECT_EQ(runs[0]["metrics"]["train/loss"].size(), epochs_of(run_dir).size()) << runs[0]["metrics"]["train/loss"];
}

// Under ddp only rank 0 logs: one MLflow run, however many ranks.
TEST_F(MlflowTracking, UnderDdpOnlyRankZeroLogs) {
  MlflowServer& server = shared_server();
  ASSERT_TRUE(server.up()) << server.log();
  const fs::path file = write_text(dir_ / "t.yaml", config(server.uri(), "ddp", 2));
  const ProcessResult r = run_gputrain({"train", "--config", file.string(), "--output", (dir_ / "runs").string(),
                                        "--nproc", "2", "--set", "strategy=ddp", "--set", "ddp.backend=gloo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json runs = read_back(server.uri(), "ddp");
  ASSERT_EQ(runs.size(), 1u) << runs;
  EXPECT_EQ(runs[0]["status"], "FINISHED");
  EXPECT_EQ(runs[0]["metrics"]["train/loss"].size(), 2u) << runs[0];
  EXPECT_EQ(runs[0]["params"]["strategy"], "ddp");
  EXPECT_EQ(r.err.find("[rank 1] [info] MLflow"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gputrain::testing
