// The run report end to end, with the tools people read it with: `gputrain
// train` and `gputrain report` as child processes, TensorBoard's own Python
// reader on the event files, and a headless Chromium on report.html.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gputrain/report/html_report.h"
#include "gputrain/report/tensorboard.h"
#include "report/run_fixture.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::run_gputrain;
using testing::TempDir;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

struct ToolResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` through the shell, each argument quoted; stderr is kept in `scratch`.
ToolResult run_tool(const std::vector<std::string>& argv, const fs::path& scratch) {
  std::string command;
  for (const auto& arg : argv) {
    std::string quoted = "'";
    for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += quoted + "' ";
  }
  const fs::path err = scratch / "stderr.txt";
  command += "2>'" + err.string() + "'";
  ToolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = testing::read_text(err);
  return result;
}

std::vector<json> read_jsonl(const fs::path& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  }
  return files;
}

TEST(TrainCommand, WritesRunRecordDeviceReportEventsAndTheReport) {
  TempDir dir;
  const fs::path config = testing::write_text(dir / "dp.yaml", R"(
name: dp-run
device: cpu
strategy: dp
dp: {replicas: 3}
data: {dataset: synthetic, samples: 100, test_samples: 40, features: 6, classes: 3, batch_size: 32,
       num_workers: 1, pin_memory: false}
model: {name: mlp, hidden: [8]}
train: {epochs: 2, log_every: 2}
)");
  const auto r = run_gputrain({"train", "--config", config.string(), "--output", (dir / "runs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path run = dir / "runs" / "dp-run";
  EXPECT_EQ(json::parse(r.out)["report"], (run / "report.html").string());
  EXPECT_TRUE(has(r.err, "(loader wait ")) << r.err;
  EXPECT_FALSE(has(r.err, "GPU monitor")) << "no monitor off CUDA";

  // metrics.jsonl: every epoch's train record has the loader's wait beside its time.
  int epochs = 0;
  for (const auto& line : read_jsonl(run / "metrics.jsonl")) {
    if (line["split"] != "train" || !line.contains("epoch_s")) continue;
    ++epochs;
    ASSERT_TRUE(line.contains("loader_wait_s")) << line;
    EXPECT_GE(line["loader_wait_s"].get<double>(), 0.0);
    EXPECT_LE(line["loader_wait_s"].get<double>(), line["epoch_s"].get<double>());
  }
  EXPECT_EQ(epochs, 2);

  // run.json: dp over 3 replicas; 32 rows split 11 + 11 + 10, the last 100 % 32 = 4 rows 2 + 2.
  const json info = json::parse(testing::read_text(run / "run.json"));
  EXPECT_EQ(info["status"], "finished");
  EXPECT_EQ(info["strategy"], "dp");
  EXPECT_EQ(info["task"], "classification");
  EXPECT_EQ(info["last_micro_batch"], 4);
  ASSERT_EQ(info["full_split"].size(), 3u);
  EXPECT_EQ(info["full_split"][2]["end"].get<int>() - info["full_split"][2]["begin"].get<int>(), 10);
  ASSERT_EQ(info["last_split"].size(), 2u);
  EXPECT_TRUE(json::parse(testing::read_text(run / "device.json")).contains("gpus"));

  const std::string html = testing::read_text(run / "report.html");
  EXPECT_TRUE(has(html, R"(<span class="badge ok">finished</span>)"));
  EXPECT_TRUE(has(html, "<td>11 [11, 22)</td><td>2 [2, 4)</td>")) << "replica 1's rows";
  EXPECT_TRUE(has(html, "<figcaption>Loader wait</figcaption>"));
  EXPECT_EQ(event_files(run).size(), 1u);
}

TEST(TrainCommand, ARunThatFailsStillGetsItsReport) {
  // The disk fills (a file size limit) when the final weights of a wide model
  // are written, after both epochs: exit code 2, and the report shows them.
  TempDir dir;
  const fs::path run = dir / "runs" / "broken";
  const fs::path config = testing::write_text(dir / "c.yaml", R"(
name: broken
device: cpu
data: {dataset: synthetic, samples: 64, test_samples: 16, features: 4, batch_size: 16, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [256, 256]}
train: {epochs: 2, log_every: 2}
checkpoint: {every: 0}
)");
  const auto r = run_gputrain({"train", "--config", config.string(), "--output", (dir / "runs").string()}, {},
                              testing::kSourceDir, testing::file_size_limit(200 * 1024));
  if (r.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here (setrlimit refused)";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(has(r.err, "model.pt: cannot write: File too large")) << r.err;
  const json info = json::parse(testing::read_text(run / "run.json"));
  EXPECT_EQ(info["status"], "failed");
  EXPECT_TRUE(has(info["error"].get<std::string>(), "model.pt: cannot write")) << info;
  EXPECT_FALSE(info["ended"].get<std::string>().empty());
  const std::string html = testing::read_text(run / "report.html");
  EXPECT_TRUE(has(html, R"(<span class="badge bad">failed</span>)"));
  EXPECT_TRUE(has(html, "The run failed: "));
  EXPECT_TRUE(has(html, "<figcaption>Loss</figcaption>"));
}

TEST(ReportCommand, WritesTheReportOfAnInterruptedRunWhereAsked) {
  TempDir dir;
  testing::write_interrupted_run(dir / "run");
  const auto to_file = run_gputrain({"report", (dir / "run").string(), "--out", (dir / "x.html").string()});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, (dir / "x.html").string() + "\n");
  EXPECT_TRUE(has(testing::read_text(dir / "x.html"), "did not finish"));
  const auto by_default = run_gputrain({"report", (dir / "run").string()});
  ASSERT_EQ(by_default.exit_code, 0) << by_default.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "report.html"));
}

TEST(ReportCommand, BadRunDirectoriesExitTwo) {
  TempDir dir;
  const auto missing = run_gputrain({"report", (dir / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(has(missing.err, "no such run directory")) << missing.err;
  const auto empty = run_gputrain({"report", dir.path().string()});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_TRUE(has(empty.err, "no metrics.jsonl")) << empty.err;
  testing::write_finished_run(dir / "run");
  const auto bad_out = run_gputrain({"report", (dir / "run").string(), "--out", (dir / "no" / "x.html").string()});
  EXPECT_EQ(bad_out.exit_code, 2);
  EXPECT_TRUE(has(bad_out.err, "the directory for --out does not exist")) << bad_out.err;
}

// Issue 62 #1: --out never names a file of the run the report is made from
// (its metrics, config, weights, checkpoints): exit 2 naming it, the file
// untouched. The run's own report.html is the one file of it report writes.
TEST(ReportCommand, NeverWritesOverAFileOfItsRun) {
  TempDir dir;
  const fs::path run = dir / "run";
  testing::write_finished_run(run);
  testing::write_text(run / "model.pt", "the weights");
  testing::write_text(run / "checkpoints" / "last.ckpt", "a checkpoint");
  for (const fs::path& file : {run / "metrics.jsonl", run / "config.yaml", run / "model.pt",
                               run / "checkpoints" / "last.ckpt", dir / "link-to-metrics"}) {
    if (file.filename() == "link-to-metrics") fs::create_symlink(run / "metrics.jsonl", file);
    const std::string before = testing::read_text(file);
    const auto r = run_gputrain({"report", run.string(), "--out", file.string()});
    EXPECT_EQ(r.exit_code, 2) << file << r.err;
    EXPECT_TRUE(has(r.err, "--out " + file.string() + ": lies inside " + run.string() +
                               " (the run directory), whose files this command reads"))
        << r.err;
    EXPECT_EQ(testing::read_text(file), before) << file;
  }
  EXPECT_EQ(run_gputrain({"report", run.string(), "--out", (run / "report.html").string()}).exit_code, 0);
  EXPECT_EQ(run_gputrain({"report", run.string()}).exit_code, 0) << "again, over its own report";
}

// Issue 17 #14: as for train, a device, a path under a file or a full disk is
// the user's to fix (exit 2), and no partial report is left.
TEST(ReportCommand, UnwritableOutExitsTwoAndLeavesNothing) {
  TempDir dir;
  testing::write_finished_run(dir / "run");
  testing::write_text(dir / "file", "a regular file");
  for (const fs::path& out : {fs::path("/dev/full"), dir / "file" / "x.html"}) {
    const auto r = run_gputrain({"report", (dir / "run").string(), "--out", out.string()});
    EXPECT_EQ(r.exit_code, 2) << out << r.err;
    EXPECT_TRUE(has(r.err, out.string() + ": ")) << r.err;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full")) << "/dev/full was replaced";
  const auto full = run_gputrain({"report", (dir / "run").string(), "--out", (dir / "x.html").string()}, {},
                                 testing::kSourceDir, testing::file_size_limit(1000));
  if (full.exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here";
  EXPECT_EQ(full.exit_code, 2) << full.err;
  EXPECT_TRUE(has(full.err, "x.html: cannot write: File too large")) << full.err;
  EXPECT_FALSE(fs::exists(dir / "x.html"));
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(has(entry.path().filename().string(), ".tmp-")) << entry.path();
  }
}

TEST(TensorBoard, ItsOwnReaderFindsEveryScalarAtItsStep) {
  const fs::path python = testing::venv_python();
  if (!fs::exists(python)) GTEST_SKIP() << python << " is missing: run scripts/setup.sh";
  TempDir dir;
  RunInfo run;
  run.task = Task::kClassification;
  run.amp = config::AmpMode::kFp16;
  std::map<std::string, std::map<int64_t, float>> expected;  // tag -> step -> value
  fs::create_directories(dir / "events");
  {
    TensorBoardWriter writer(dir / "events", run);
    for (int64_t step : {5, 10}) {
      writer.on_step({1, step, 1.0 / static_cast<double>(step), 0.5, 1234.5, 0.01, 0.1, 32768.0, 0, {}});
      expected["train_step/loss"][step] = static_cast<float>(1.0 / static_cast<double>(step));
      expected["train_step/accuracy"][step] = 0.5f;
      expected["train_step/samples_per_s"][step] = 1234.5f;
      expected["train_step/lr"][step] = 0.01f;
      expected["train_step/loss_scale"][step] = 32768.0f;
    }
    train::EpochMetrics m;
    m.epoch = 1;
    m.step = 10;
    m.train = {30.0, 48, 60, true, {}, {}};
    m.test = {5.0, 9, 10, true, {}, {}};
    m.has_test = true;
    m.samples_per_s = 1100.0;
    m.epoch_s = 2.5;
    m.lr = 0.01;
    m.loss_scale = 32768.0;
    m.loader_wait_s = 0.75;
    m.cuda = true;
    m.memory_allocated = int64_t{1} << 30;
    m.memory_reserved = int64_t{2} << 30;
    m.memory_peak = int64_t{3} << 29;
    train::GpuActivity gpu;
    gpu.index = 1;
    gpu.util_mean = 42.5;
    gpu.util_max = 97.0;
    gpu.memory_used_max = int64_t{5} << 29;
    gpu.power_mean_w = 250.0;
    gpu.temperature_max_c = 66.0;
    m.gpus = {gpu};
    writer.on_epoch(m);
    for (const auto& [tag, value] : std::map<std::string, float>{{"train/loss", 0.5f},
                                                                 {"train/accuracy", 0.8f},
                                                                 {"test/loss", 0.5f},
                                                                 {"test/accuracy", 0.9f},
                                                                 {"train/samples_per_s", 1100.0f},
                                                                 {"train/lr", 0.01f},
                                                                 {"train/epoch_s", 2.5f},
                                                                 {"train/loader_wait_s", 0.75f},
                                                                 {"train/loss_scale", 32768.0f},
                                                                 {"gpu/memory_allocated_gib", 1.0f},
                                                                 {"gpu/memory_reserved_gib", 2.0f},
                                                                 {"gpu/memory_peak_gib", 1.5f},
                                                                 {"gpu/cuda1_util_mean", 42.5f},
                                                                 {"gpu/cuda1_util_max", 97.0f},
                                                                 {"gpu/cuda1_memory_used_gib", 2.5f},
                                                                 {"gpu/cuda1_power_w", 250.0f},
                                                                 {"gpu/cuda1_temperature_c", 66.0f}}) {
      expected[tag][10] = value;
    }
  }
  const ToolResult r = run_tool(
      {python.string(), std::string(testing::kSourceDir) + "/tests/report/read_events.py", (dir / "events").string()},
      dir.path());
  if (r.exit_code == 3) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json found = json::parse(r.out);
  EXPECT_DOUBLE_EQ(found["file_version"].get<double>(), 2.0);
  const json& scalars = found["scalars"];
  EXPECT_EQ(scalars.size(), expected.size()) << scalars.dump();
  for (const auto& [tag, by_step] : expected) {
    ASSERT_TRUE(scalars.contains(tag)) << tag << " missing from " << scalars.dump();
    ASSERT_EQ(scalars[tag].size(), by_step.size()) << tag;
    for (const auto& point : scalars[tag]) {
      const int64_t step = point[0].get<int64_t>();
      ASSERT_EQ(by_step.count(step), 1u) << tag << " at step " << step;
      EXPECT_FLOAT_EQ(point[1].get<float>(), by_step.at(step)) << tag << " at step " << step;
    }
  }
}

// Runs before the page's own content: records any error it raises.
constexpr const char* kErrorRecorder =
    "<script>window.__errors = []; window.addEventListener('error', e => window.__errors.push(String(e.message)));"
    "</script>";
// Runs after it: counts the charts and measures them, into a <pre> --dump-dom prints.
constexpr const char* kChartCheck = R"(<script>
(() => {
  const svgs = Array.from(document.querySelectorAll('svg'));
  const drawn = svgs.filter(s => { const r = s.getBoundingClientRect(); return r.width > 200 && r.height > 100; });
  const out = document.createElement('pre');
  out.id = 'gputrain-check';
  out.textContent = JSON.stringify({svgs: svgs.length, drawn: drawn.length,
    lines: document.querySelectorAll('svg polyline').length, errors: window.__errors});
  document.body.appendChild(out);
})();
</script>)";

TEST(HtmlReportInBrowser, ChromiumDrawsEveryChartWithoutConsoleErrors) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  }
  TempDir dir;
  testing::write_finished_run(dir / "run");
  write_html_report(dir / "run", dir / "report.html");
  std::string page = testing::read_text(dir / "report.html");
  page.insert(page.find("<head>") + 6, kErrorRecorder);
  page.insert(page.rfind("</body>"), kChartCheck);
  const fs::path checked = testing::write_text(dir / "checked.html", page);

  const fs::path artifacts = testing::kTestArtifacts;
  fs::create_directories(artifacts);
  const fs::path screenshot = artifacts / "report.png";
  fs::remove(screenshot);
  // Every host name fails to resolve, so a fetch would show up as a console error.
  const ToolResult r = run_tool(
      {"timeout", "60", "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
       "--disable-extensions", "--user-data-dir=" + (dir / "profile").string(), "--host-resolver-rules=MAP * ~NOTFOUND",
       "--enable-logging=stderr", "--v=0", "--hide-scrollbars", "--window-size=1280,4200",
       "--screenshot=" + screenshot.string(), "--dump-dom", "file://" + checked.string()},
      dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto begin = r.out.find("<pre id=\"gputrain-check\">");
  ASSERT_NE(begin, std::string::npos) << "the check script did not run:\n" << r.out.substr(0, 2000);
  const auto start = r.out.find('>', begin) + 1;
  const json check = json::parse(r.out.substr(start, r.out.find("</pre>", start) - start));
  EXPECT_EQ(check["svgs"], testing::kFinishedRunCharts) << check;
  EXPECT_EQ(check["drawn"], testing::kFinishedRunCharts) << "every chart is laid out at a readable size: " << check;
  EXPECT_GE(check["lines"].get<int>(), testing::kFinishedRunCharts) << check;
  EXPECT_TRUE(check["errors"].empty()) << check;
  std::istringstream log(r.err);
  for (std::string line; std::getline(log, line);) {
    EXPECT_FALSE(has(line, ":CONSOLE")) << "the page wrote to the console: " << line;
  }
  ASSERT_TRUE(fs::exists(screenshot));
  EXPECT_GT(fs::file_size(screenshot), 10000u);
  std::cout << "screenshot of the report: " << screenshot.string() << std::endl;
  RecordProperty("screenshot", screenshot.string());
}

}  // namespace
}  // namespace gputrain::report
