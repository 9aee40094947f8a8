// report.html's contents for finished, interrupted and bare run directories.
#include "gputrain/report/html_report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "gputrain/common/error.h"
#include "gputrain/report/metrics_writer.h"
#include "gputrain/report/run_info.h"
#include "report/run_fixture.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string report_of(const fs::path& dir) {
  write_html_report(dir, dir / "report.html");
  return testing::read_text(dir / "report.html");
}

TEST(HtmlReport, FinishedRunHasEveryChartTableAndSection) {
  TempDir dir;
  testing::write_finished_run(dir.path());
  const std::string html = report_of(dir.path());
  EXPECT_EQ(count(html, "<svg"), testing::kFinishedRunCharts);
  EXPECT_EQ(count(html, "</svg>"), testing::kFinishedRunCharts);
  for (const char* caption :
       {"<figcaption>Loss</figcaption>", "<figcaption>Accuracy</figcaption>", "<figcaption>Throughput</figcaption>",
        "<figcaption>Hardware efficiency</figcaption>", "<figcaption>Learning rate</figcaption>",
        "<figcaption>Loss scale (fp16)</figcaption>", "<figcaption>GPU memory</figcaption>",
        "<figcaption>GPU utilization</figcaption>", "<figcaption>Loader wait</figcaption>"}) {
    EXPECT_TRUE(has(html, caption)) << caption;
  }
  EXPECT_TRUE(has(html, R"(<span class="badge ok">finished</span>)"));
  EXPECT_FALSE(has(html, R"(class="notes")")) << "a complete run needs no notes";
  // Epoch 3: train accuracy 80/100, test 35/40, GPU mean (70 + 72) / 2.
  EXPECT_TRUE(has(html, "<td>80.00%</td>"));
  EXPECT_TRUE(has(html, "<td>87.50%</td>"));
  EXPECT_TRUE(has(html, "<td>71%</td>"));
  EXPECT_TRUE(has(html, "87.50% (epoch 3)"));  // the test-accuracy card
  EXPECT_TRUE(has(html, ">500<"));             // samples/s over all epochs: 300 samples in 0.6 s
  // The test curve's last marker carries its value.
  EXPECT_TRUE(has(html, "<title>test: optimizer step 12, 87.5</title>"));
  // dp's splits: 30 rows over 2 replicas are 15 + 15; the last 10 are 5 + 5.
  EXPECT_TRUE(has(html, "<h2>Batch splits</h2>"));
  EXPECT_TRUE(has(html, "<td>15 [0, 15)</td><td>5 [0, 5)</td>"));
  EXPECT_TRUE(has(html, "<td>15 [15, 30)</td><td>5 [5, 10)</td>"));
  // The config and the device report, escaped.
  EXPECT_TRUE(has(html, "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; friends"));
  EXPECT_TRUE(has(html, "Fake &lt;GPU&gt; &amp; &quot;Co&quot;"));
  EXPECT_TRUE(has(html, "80.0 GiB"));
  EXPECT_FALSE(has(html, "<script")) << "the page runs no script";
  // Self-contained: nothing to fetch (the SVG namespace is a name, not a fetch).
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=)")));
  EXPECT_EQ(count(html, "http"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
}

// One epoch whose test split has a 2-class confusion matrix; run.json names
// the classes `names` (none: as a run.json from before names were recorded).
void write_two_class_run(const fs::path& dir, const std::vector<std::string>& names) {
  RunInfo info;
  info.name = "two-classes";
  info.status = RunStatus::kFinished;
  info.task = Task::kClassification;
  info.class_names = names;
  write_run_info(dir / "run.json", info);
  MetricsWriter writer(dir / "metrics.jsonl");
  train::EpochMetrics m;
  m.epoch = 1;
  m.step = 4;
  m.train.loss_sum = 10.0;
  m.train.correct = 15;
  m.train.samples = 20;
  m.test.loss_sum = 4.0;
  m.test.correct = 17;
  m.test.samples = 20;
  m.test.confusion = {9, 1, 2, 8};
  m.test.class_samples = {10, 10};
  m.test.class_correct = {9, 8};
  m.has_test = true;
  writer.on_epoch(m);
}

TEST(HtmlReport, TheConfusionMatrixNamesTheClassesRunJsonRecorded) {
  TempDir dir;
  write_two_class_run(dir.path(), {"cat", "<dog>"});
  const std::string named = report_of(dir.path());
  EXPECT_TRUE(has(named, "<th>0 cat</th><th>1 &lt;dog&gt;</th>")) << named;
  EXPECT_TRUE(has(named, "<td>0 cat</td><td>9</td><td>1</td>"));
  EXPECT_TRUE(has(named, "<td>1 &lt;dog&gt;</td><td>2</td><td>8</td>"));

  TempDir old;
  write_two_class_run(old.path(), {});
  const std::string indices = report_of(old.path());
  EXPECT_TRUE(has(indices, "<th>0</th><th>1</th>")) << indices;
  EXPECT_TRUE(has(indices, "<td>0</td><td>9</td><td>1</td>"));
}

TEST(HtmlReport, TheTargetAndAnEarlyEndAreInTheRunTable) {
  TempDir dir;
  testing::write_finished_run(dir.path());
  const fs::path run_json = dir.path() / "run.json";
  RunInfo info = read_run_info(run_json);
  info.target_accuracy = 0.93;
  write_run_info(run_json, info);
  EXPECT_TRUE(has(report_of(dir.path()), "<td>93.00%, not reached</td>"));
  train::TrainSummary summary;
  summary.target = train::TargetReached{0.93, 0.9312, 2, 37, 4.5, 5.25};
  summary.ended_early = "reached the target";
  record_outcome(info, summary);
  write_run_info(run_json, info);
  const std::string html = report_of(dir.path());
  EXPECT_TRUE(has(html, "93.00%, reached at epoch 2 (step 37) with 93.12%: 4.50 s of training (5.25 s wall)")) << html;
  EXPECT_TRUE(has(html, "<td>ended early</td><td>reached the target</td>"));
}

TEST(HtmlReport, InterruptedRunIsShownAsFarAsItGot) {
  TempDir dir;
  testing::write_interrupted_run(dir.path());
  const std::string html = report_of(dir.path());
  EXPECT_EQ(count(html, "<svg"), testing::kFinishedRunCharts);
  EXPECT_TRUE(has(html, R"(<span class="badge warn">did not finish</span>)"));
  EXPECT_TRUE(has(html, "run.json records no end"));
  EXPECT_TRUE(has(html, "2 of 3 epochs completed"));
  EXPECT_TRUE(has(html, "Epoch 2 has no test record"));
  EXPECT_TRUE(has(html, "The last line of metrics.jsonl (line 8) is cut short"));
  EXPECT_TRUE(has(html, "<td>no test record</td>"));
  EXPECT_TRUE(has(html, ">2 / 3<"));  // the epochs card
  // Epoch 1's test point (25 of 40) is drawn; epoch 2 has none.
  EXPECT_TRUE(has(html, "<title>test: optimizer step 4, 62.5</title>"));
  EXPECT_FALSE(has(html, "<title>test: optimizer step 8,"));
}

TEST(HtmlReport, IntervalsAfterTheLastEpochAndFailuresAreNamed) {
  TempDir dir;
  testing::write_finished_run(dir.path());
  testing::write_text(dir / "run.json",
                      R"({"name": "crashed", "status": "failed", "error": "data.root: label 77 <bad>", "epochs": 5,)"
                      R"( "task": "classification", "amp": "off"})");
  std::ofstream(dir / "metrics.jsonl", std::ios::app)
      << R"({"epoch": 4, "step": 14, "split": "train", "loss": 0.1, "accuracy": 0.9, "samples_per_s": 990.0,)"
      << R"( "lr": 0.1, "elapsed_s": 8.0, "loss_scale": 1.0, "skipped_steps": 0})"
      << "\n";
  const std::string html = report_of(dir.path());
  EXPECT_TRUE(has(html, R"(<span class="badge bad">failed</span>)"));
  EXPECT_TRUE(has(html, "The run failed: data.root: label 77 &lt;bad&gt;"));
  EXPECT_TRUE(has(html, "3 of 5 epochs completed"));
  EXPECT_TRUE(has(html, "1 log interval(s) of epoch 4 were recorded"));
  EXPECT_FALSE(has(html, "Loss scale (fp16)")) << "amp: off has no loss scale";
  EXPECT_TRUE(has(html, "<h1>crashed<"));
}

TEST(HtmlReport, BareRunDirectoryStillRendersAndSaysWhatIsMissing) {
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl",
                      "{\"epoch\": 1, \"step\": 2, \"split\": \"train\", \"loss\": 0.5, \"accuracy\": 0.5, "
                      "\"samples_per_s\": 10, \"lr\": 0.01, \"elapsed_s\": 1}\nnot json\n"
                      "{\"epoch\": 1, \"step\": 4, \"split\": \"train\", \"loss\": 0.4, \"accuracy\": 0.6, "
                      "\"samples_per_s\": 12, \"lr\": 0.01, \"elapsed_s\": 2}\n");
  const std::string html = report_of(dir.path());
  EXPECT_TRUE(has(html, "status unknown"));
  EXPECT_TRUE(has(html, "There is no run.json"));
  EXPECT_TRUE(has(html, "There is no config.yaml"));
  EXPECT_TRUE(has(html, "There is no device.json"));
  EXPECT_TRUE(has(html, "Line 2 of metrics.jsonl is not a JSON object"));
  // Guessed from the records: labeled (log intervals have a loss), classification (accuracy > 0).
  EXPECT_EQ(count(html, "<svg"), 4);
  EXPECT_TRUE(has(html, "<figcaption>Accuracy</figcaption>"));
}

// A file with no record at all is not a run's metrics: refused, naming its first line.
TEST(HtmlReport, AMetricsFileWithoutOneRecordIsRefusedAtItsFirstLine) {
  TempDir dir;
  testing::write_text(dir / "metrics.jsonl", "\nPK\x03\x04 not json\nnor this\n");
  try {
    report_of(dir.path());
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), (dir / "metrics.jsonl").string() + ":2: not a JSON object, and no line is")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

TEST(HtmlReport, UnlabeledRunsChartThroughputByEpoch) {
  TempDir dir;
  testing::write_text(dir / "run.json", R"({"status": "finished", "task": "unlabeled", "epochs": 2})");
  std::string metrics;
  for (int epoch = 1; epoch <= 2; ++epoch) {
    metrics += "{\"epoch\": " + std::to_string(epoch) +
               ", \"step\": 0, \"split\": \"train\", \"loss\": 0, \"accuracy\": 0, \"samples_per_s\": 500, "
               "\"lr\": 0, \"elapsed_s\": 1, \"epoch_s\": 0.2, \"samples\": 100, \"loader_wait_s\": 0.01}\n";
  }
  testing::write_text(dir / "metrics.jsonl", metrics);
  const std::string html = report_of(dir.path());
  EXPECT_EQ(count(html, "<svg"), 2);  // throughput and loader wait: no loss, accuracy or learning rate
  EXPECT_FALSE(has(html, "<figcaption>Loss</figcaption>"));
  EXPECT_FALSE(has(html, "<figcaption>Learning rate</figcaption>"));
  EXPECT_TRUE(has(html, "<title>epoch: epoch 2, 500</title>"));
  EXPECT_FALSE(has(html, "<th>step</th>"));
}

TEST(HtmlReport, EmptyMetricsSaysTheRunStoppedEarlyAndNoMetricsIsAUserError) {
  TempDir dir;
  testing::write_text(dir / "run" / "metrics.jsonl", "");
  const std::string html = report_of(dir / "run");
  EXPECT_TRUE(has(html, "metrics.jsonl holds no records"));
  EXPECT_EQ(count(html, "<svg"), 0);
  try {
    write_html_report(dir.path(), dir / "report.html");
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_TRUE(has(e.what(), "no metrics.jsonl")) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

}  // namespace
}  // namespace gputrain::report
