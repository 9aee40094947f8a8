// dataset: csv — tables with a header row: numeric features, integer, text or
// real targets, quoting, and each way such files can be wrong, named by
// file:line:column.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gputrain/common/error.h"
#include "gputrain/data/dataset.h"
#include "support/temp_dir.h"
#include "test_datasets.h"

namespace gputrain::data {
namespace {

namespace fs = std::filesystem;
using gputrain::testing::TempDir;

class CsvData : public ::testing::Test {
 protected:
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_.path() / name) << text; }
  void write_both(const std::string& train, const std::string& test) {
    write("train.csv", train);
    write("test.csv", test);
  }
  config::DataConfig csv(const std::string& target_column = "") const {
    config::DataConfig config;
    config.dataset = config::DatasetName::kCsv;
    config.root = dir_.path().string();
    config.target_column = target_column;
    return config;
  }
  static std::string error(const config::DataConfig& config, Split split = Split::kTrain) {
    return testing::make_dataset_error(config, split);
  }
  std::string file(const std::string& name) const { return (dir_.path() / name).string(); }

  TempDir dir_{"csv"};
};

TEST_F(CsvData, IntegerTargetsAreClassesOverBothFiles) {
  write_both("a,b,label\n1,2,0\n3.5,-4,1\n", "a,b,label\n5,6,3\n");
  const auto train = make_dataset(csv(), Split::kTrain, 0);
  EXPECT_EQ(train->info().target_kind, TargetKind::kClasses);
  EXPECT_EQ(train->info().classes, 4);  // the test file's 3 counts
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{2}));
  EXPECT_TRUE(torch::equal(train->inputs(), torch::tensor({{1.0f, 2.0f}, {3.5f, -4.0f}})));
  EXPECT_TRUE(torch::equal(train->targets(), torch::tensor({0, 1}, torch::kInt64)));
  EXPECT_EQ(make_dataset(csv(), Split::kTest, 0)->info().classes, 4);
}

TEST_F(CsvData, TextLabelsAreNumberedInSortedOrderAndTheTargetColumnIsNamed) {
  write_both("species,length,width\nvirginica,6.3,3.3\nsetosa,5.1,3.5\n\"versicolor\",7.0,3.2\n",
             "species,length,width\nsetosa,4.9,3.0\n");
  const auto train = make_dataset(csv("species"), Split::kTrain, 0);
  EXPECT_EQ(train->info().class_names, (std::vector<std::string>{"setosa", "versicolor", "virginica"}));
  EXPECT_TRUE(torch::equal(train->targets(), torch::tensor({2, 0, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(train->inputs(), torch::tensor({{6.3f, 3.3f}, {5.1f, 3.5f}, {7.0f, 3.2f}})));
}

TEST_F(CsvData, RealTargetsAreARegressionAndQuotesCrlfAndBlankLinesRead) {
  write_both("\"x, first\",y\r\n1,0.5\r\n\r\n2,\"1.5\"\r\n", "\"x, first\",y\n3,2\n");
  const auto train = make_dataset(csv("y"), Split::kTrain, 0);
  EXPECT_EQ(train->info().target_kind, TargetKind::kValues);
  EXPECT_EQ(train->info().targets, 1);
  EXPECT_TRUE(torch::equal(train->targets(), torch::tensor({{0.5f}, {1.5f}})));
  EXPECT_EQ(train->info().samples, 2);
}

TEST_F(CsvData, BadTablesNameTheFileTheLineAndTheColumn) {
  write_both("a,name,city,label\n1,x,y,0\n2,3,z,1\n", "a,name,city,label\n1,2,3,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") +
                              ":2:2: column 'name' holds 'x', which is not a number. Features must be numbers: drop "
                              "columns 'name', 'city' or encode them as numbers");
  write_both("a,label\n1,0\n2\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv()),
            "csv: " + file("train.csv") + ":3: 1 fields, but the header has 2; every row needs one value per column");
  write_both("a,label\n1,0\n", "a,lable\n1,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") + " has the columns a, label but " + file("test.csv") +
                              " has a, lable; both need the same columns in the same order");
  write_both("a,label\n1,0\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv("lable")), "csv: " + file("train.csv") +
                                     ": has no column 'lable' (data.target_column); its columns: a, label (did you "
                                     "mean 'label'?)");
  const std::string classes =
      "integer labels are classes 0, 1, ... (at most 100000 classes; a regression's values "
      "need a fraction, e.g. 5.0)";
  write_both("a,label\n1,-1\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") + ":2:2: class label -1 in column 'label'; " + classes);
  // Issue 37: a label of 1e9 meant 1e9 + 1 classes and ended in "out of memory".
  write_both("a,label\n1,0\n", "a,label\n1,0\n2,1000000000\n");
  EXPECT_EQ(error(csv()), "csv: " + file("test.csv") + ":3:2: class label 1000000000 in column 'label'; " + classes);
  write_both("a,label\n\"1,0\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") + ":2: a quoted field is never closed (a \" is missing)");
  write_both("a,label\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") + ": has a header but no rows");
  write("train.csv", "a,label\n1,0\n");
  fs::remove(dir_.path() / "test.csv");
  EXPECT_EQ(error(csv(), Split::kTest), "csv: " + file("test.csv") +
                                            " does not exist; data.root must hold train.csv and test.csv, each with "
                                            "a header row");
}

TEST_F(CsvData, AnEmptyOrNanTargetAmongNumbersIsRefusedNotMadeAClass) {
  write_both("a,label\n1,0\n2,\n3,1\n", "a,label\n1,0\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") +
                              ":3:2: the target 'label' is empty. Every row needs its target: fill it in or delete "
                              "the row (a missing target would otherwise train as a class of its own)");
  write_both("a,label\n1,0\n3,1\n", "a,label\n1,0\n2, NaN\n");
  EXPECT_NE(error(csv()).find(file("test.csv") + ":3:2: the target 'label' is 'NaN', a missing value among numbers"),
            std::string::npos)
      << error(csv());
  write_both("a,y\n1,0.5\n2,nan\n", "a,y\n1,0.5\n");
  EXPECT_NE(error(csv()).find(file("train.csv") + ":3:2: the target 'y' is 'nan'"), std::string::npos) << error(csv());
  // Among text labels, a cell reading like a missing value is a label like the others.
  write_both("a,label\n1,cat\n2,none\n", "a,label\n1,cat\n");
  EXPECT_EQ(make_dataset(csv(), Split::kTrain, 0)->info().class_names, (std::vector<std::string>{"cat", "none"}));
}

TEST_F(CsvData, ACommaEndingEveryLineMakesNoTargetColumn) {
  write_both("a,b,label,\n1,2,0,\n3,4,1,\n", "a,b,label\n5,6,1\n");
  const auto train = make_dataset(csv(), Split::kTrain, 0);
  EXPECT_EQ(train->info().input_shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(train->info().target_kind, TargetKind::kClasses);
  EXPECT_TRUE(torch::equal(train->targets(), torch::tensor({0, 1}, torch::kInt64)));
  EXPECT_TRUE(torch::equal(train->inputs(), torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}})));
  // An unnamed last column that holds values is no target either.
  write_both("a,label,\n1,0,7\n", "a,label,\n1,0,7\n");
  EXPECT_EQ(error(csv()), "csv: " + file("train.csv") +
                              ":1: the last column, the target by default, has no name; name it in the header or "
                              "set data.target_column to the target's column");
}

TEST_F(CsvData, ExportQuirksReadOrAreNamedWithTheFix) {
  // Excel's byte order mark is no part of the first column's name.
  write_both(
      "\xEF\xBB\xBF"
      "a,label\n1,0\n",
      "a,label\n2,1\n");
  EXPECT_EQ(make_dataset(csv(), Split::kTrain, 0)->info().samples, 1);
  write_both("a;b;label\n1;2;0\n", "a,b,label\n1,2,0\n");
  EXPECT_NE(error(csv()).find(file("train.csv") + ":1: the header is one column, 'a;b;label', holding ';'"),
            std::string::npos)
      << error(csv());
  write_both("a,b,a,label\n1,2,3,0\n", "a,b,a,label\n1,2,3,0\n");
  EXPECT_EQ(error(csv()),
            "csv: " + file("train.csv") + ":1: columns 1 and 3 are both named 'a'; give each column its own name");
  write_both("a,label\n0x10,0\n", "a,label\n1,0\n");
  EXPECT_NE(error(csv()).find("column 'a' holds '0x10', which is not a number"), std::string::npos) << error(csv());
  write_both("a,label\n" + std::string(100000, 'x') + ",0\n", "a,label\n1,0\n");
  EXPECT_NE(error(csv()).find("holds '" + std::string(40, 'x') + "... (100000 characters)'"), std::string::npos);
  EXPECT_LT(error(csv()).size(), 400U);
}

TEST_F(CsvData, WholeNumbersWrittenAsRealsAreARegressionSaidPlainly) {
  write_both("a,label\n1,1.0\n2,0.0\n", "a,label\n1,1.0\n");
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  const auto train = make_dataset(csv(), Split::kTrain, 0);
  spdlog::set_default_logger(previous);
  EXPECT_EQ(train->info().target_kind, TargetKind::kValues);
  EXPECT_NE(log.str().find("column 'label' holds whole numbers written as reals ('1.0' at " + file("train.csv") +
                           ":2): a regression target"),
            std::string::npos)
      << log.str();
}

}  // namespace
}  // namespace gputrain::data
