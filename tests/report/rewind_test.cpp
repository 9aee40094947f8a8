// metrics.jsonl before a resumed run appends to it.
#include <gtest/gtest.h>

#include "gputrain/report/metrics_writer.h"
#include "support/temp_dir.h"

namespace gputrain::report {
namespace {

// Steps 4 and 8 logged, epoch 1 ended at step 8 (train and test records),
// step 12 logged, then a crash in the middle of a line.
const std::string kWritten = R"({"epoch":1,"step":4,"split":"train","loss":1.0}
{"epoch":1,"step":8,"split":"train","loss":0.9}
{"epoch":1,"step":8,"split":"train","loss":0.95,"epoch_s":0.1}
{"epoch":1,"step":8,"split":"test","loss":0.8}
{"epoch":2,"step":12,"split":"train","loss":0.7}
{"epoch":2,"step":16,"spl)";

TEST(RewindMetrics, KeepsWhatPrecedesTheCheckpoint) {
  testing::TempDir dir;
  const auto path = testing::write_text(dir / "metrics.jsonl", kWritten);
  rewind_metrics(path, 8, /*before_test_pass=*/true);  // stopped after step 8, before epoch 1's test pass
  EXPECT_EQ(testing::read_text(path), R"({"epoch":1,"step":4,"split":"train","loss":1.0}
{"epoch":1,"step":8,"split":"train","loss":0.9}
)");
  testing::write_text(path, kWritten);
  rewind_metrics(path, 8, /*before_test_pass=*/false);  // the checkpoint at the end of epoch 1
  EXPECT_EQ(testing::read_text(path), kWritten.substr(0, kWritten.find("{\"epoch\":2")));
  rewind_metrics(dir / "absent.jsonl", 8, false);
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.jsonl"));
}

}  // namespace
}  // namespace gputrain::report
