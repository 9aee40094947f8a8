#include <gtest/gtest.h>

#include "gputrain/train/evaluate.h"

namespace gputrain::train {
namespace {

TEST(TestLine, MatchesTheSeedFormatExactly) {
  step::EvalResult r;
  r.loss_sum = 123.0;
  r.correct = 9012;
  r.samples = 10000;
  EXPECT_EQ(format_test_line(r), "Test set: Average loss: 0.0123, Accuracy: 9012/10000 (90%)");
}

TEST(TestLine, RoundsThePercentageToAnInteger) {
  step::EvalResult r;
  r.samples = 1000;
  r.correct = 886;
  r.loss_sum = 312.34;
  EXPECT_EQ(format_test_line(r), "Test set: Average loss: 0.3123, Accuracy: 886/1000 (89%)");
  r.correct = 1000;
  EXPECT_EQ(format_test_line(r), "Test set: Average loss: 0.3123, Accuracy: 1000/1000 (100%)");
}

TEST(TestLine, RegressionShowsTheLossAlone) {
  step::EvalResult r;
  r.classification = false;
  r.samples = 4;
  r.loss_sum = 2.0;
  EXPECT_EQ(format_test_line(r), "Test set: Average loss: 0.5000");
}

TEST(ClassLines, OnePerClassFromTheConfusionMatrix) {
  step::EvalResult r;
  r.confusion = {8, 2, 0,   // class 0: 8 of 10 right
                 1, 3, 0,   // class 1: 3 of 4
                 0, 0, 0};  // class 2: none in the test split
  EXPECT_EQ(format_class_lines(r),
            (std::vector<std::string>{"Accuracy of class 0: 80% (8/10)", "Accuracy of class 1: 75% (3/4)",
                                      "Accuracy of class 2: no test samples"}));
  EXPECT_TRUE(format_class_lines(step::EvalResult{}).empty());
}

TEST(ClassLines, NameTheClassesWhereTheDataSetDoes) {
  step::EvalResult r;
  r.confusion = {8, 2, 1, 3};
  r.class_names = {"T-shirt/top", "Trouser"};
  EXPECT_EQ(format_class_lines(r), (std::vector<std::string>{"Accuracy of class 0 (T-shirt/top): 80% (8/10)",
                                                             "Accuracy of class 1 (Trouser): 75% (3/4)"}));
}

}  // namespace
}  // namespace gputrain::train
