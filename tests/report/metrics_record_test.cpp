// metrics.jsonl's records: one to_json / from_json pair, an explicit kind,
// and files written before records had a kind still read the same.
#include "metrics_record.h"

#include <gtest/gtest.h>

#include "metrics_log.h"
#include "support/temp_dir.h"

namespace gputrain::report::detail {
namespace {

MetricsRecord full(RecordKind kind) {
  MetricsRecord r;
  r.kind = kind;
  r.epoch = 3;
  r.step = 120;
  r.loss = 0.25;
  r.accuracy = 0.875;
  r.samples_per_s = 900.5;
  r.lr = 0.01;
  r.elapsed_s = 7.5;
  if (kind != RecordKind::kTest) {
    r.loss_scale = 1024;
    r.skipped_steps = 2;
  }
  if (kind == RecordKind::kInterval)
    r.ranks = train::RankTiming{2, {0.5, 0.5, 0.5}, {0, 0.125, 0.25}, {0.25, 0.375, 0.5}, 1};
  if (kind == RecordKind::kEpoch) {
    r.epoch_s = 2.5;
    r.samples = 4000;
    r.loader_wait_s = 0.125;
    r.gpu_busy = 0.875;
    r.tflops = 13.25;
    r.peak_share = 0.0267;
    r.memory_allocated = int64_t{3} << 30;
    r.memory_reserved = int64_t{4} << 30;
    r.memory_peak = int64_t{5} << 30;
    r.gpus.push_back({0, 40, 81.5, 99.0, 250.0, 61.0, int64_t{6} << 30});
  }
  if (kind == RecordKind::kTest) {
    r.samples = 10;
    r.correct = 9;
    r.per_class_accuracy = {1.0, std::nullopt};
    r.confusion = {{9, 0}, {1, 0}};
    r.top_confusions = {{1, 0, 1}};  // a record past 100 classes holds these instead; both read back
  }
  return r;
}

TEST(MetricsRecord, EveryKindComesBackFromItsLineUnchanged) {
  for (const RecordKind kind : {RecordKind::kInterval, RecordKind::kEpoch, RecordKind::kTest}) {
    const std::string line = nlohmann::ordered_json(full(kind)).dump();
    const auto read = nlohmann::json::parse(line).get<MetricsRecord>();
    EXPECT_EQ(read.kind, kind) << line;
    EXPECT_EQ(nlohmann::ordered_json(read).dump(), line);
    EXPECT_EQ(nlohmann::json::parse(line)["kind"], kRecordKinds.word(kind));
  }
}

TEST(MetricsRecord, LinesWithoutAKindAreToldApartAsBefore) {
  const auto kind_of = [](const char* line) { return record_kind(nlohmann::json::parse(line)); };
  EXPECT_EQ(kind_of(R"({"epoch":1,"step":4,"split":"train","loss":1.0})"), RecordKind::kInterval);
  EXPECT_EQ(kind_of(R"({"epoch":1,"step":8,"split":"train","loss":1.0,"epoch_s":0.5})"), RecordKind::kEpoch);
  EXPECT_EQ(kind_of(R"({"epoch":1,"step":8,"split":"test","loss":1.0})"), RecordKind::kTest);
  EXPECT_EQ(kind_of(R"({"kind":"epoch","epoch":1,"step":8,"split":"train"})"), RecordKind::kEpoch);
  EXPECT_EQ(kind_of(R"({"kind":"histogram","epoch":1})"), std::nullopt);
}

// The same run written the old way and the new way reads the same; a kind from
// a newer gputrain is left out with a note.
TEST(MetricsLog, ReadsFilesWithAndWithoutKindsAlike) {
  testing::TempDir dir;
  const auto old_file = testing::write_text(dir / "old.jsonl",
                                            R"({"epoch":1,"step":4,"split":"train","loss":1.5,"accuracy":0.5}
{"epoch":1,"step":8,"split":"train","loss":1.25,"accuracy":0.625,"epoch_s":0.5,"samples":64}
{"epoch":1,"step":8,"split":"test","loss":1.0,"accuracy":0.75,"correct":12,"samples":16}
)");
  const auto new_file =
      testing::write_text(dir / "new.jsonl",
                          R"({"kind":"interval","epoch":1,"step":4,"split":"train","loss":1.5,"accuracy":0.5}
{"kind":"epoch","epoch":1,"step":8,"split":"train","loss":1.25,"accuracy":0.625,"epoch_s":0.5,"samples":64}
{"kind":"test","epoch":1,"step":8,"split":"test","loss":1.0,"accuracy":0.75,"correct":12,"samples":16}
{"kind":"histogram","epoch":1,"step":8}
)");
  const MetricsLog before = read_metrics_log(old_file);
  const MetricsLog after = read_metrics_log(new_file);
  for (const MetricsLog* log : {&before, &after}) {
    ASSERT_EQ(log->steps.size(), 1u);
    EXPECT_EQ(log->steps[0].step, 4);
    EXPECT_EQ(log->steps[0].loss, 1.5);
    ASSERT_EQ(log->epochs.size(), 1u);
    const EpochRecord& e = log->epochs.at(1);
    ASSERT_TRUE(e.train && e.test);
    EXPECT_EQ(e.train->loss, 1.25);
    EXPECT_EQ(e.train->samples, 64);
    EXPECT_EQ(e.train->epoch_s, 0.5);
    EXPECT_EQ(e.test->accuracy, 0.75);
    EXPECT_EQ(e.step(), 8);
  }
  EXPECT_TRUE(before.notes.empty());
  ASSERT_EQ(after.notes.size(), 1u);
  EXPECT_EQ(after.notes[0],
            "Line 4 of metrics.jsonl is a record of an unknown kind (\"histogram\"), from a newer gputrain. It is "
            "left out.");
}

}  // namespace
}  // namespace gputrain::report::detail
