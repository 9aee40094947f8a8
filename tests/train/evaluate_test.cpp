#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <tuple>
#include <utility>

#include "data/test_datasets.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/parallel/strategy.h"
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

TEST(ClassLines, OnePerClassFromItsCounts) {
  step::EvalResult r;
  r.class_samples = {10, 4, 0};  // class 2: none in the test split
  r.class_correct = {8, 3, 0};
  EXPECT_EQ(format_class_lines(r),
            (std::vector<std::string>{"Accuracy of class 0: 80% (8/10)", "Accuracy of class 1: 75% (3/4)",
                                      "Accuracy of class 2: no test samples"}));
  EXPECT_TRUE(format_class_lines(step::EvalResult{}).empty());
  r.top_confusions = {{0, 1, 2}};
  EXPECT_EQ(format_class_lines(r).back(), "Confused: class 0 predicted as 1: 2 of its 10 test samples");
}

TEST(ClassLines, NameTheClassesWhereTheDataSetDoes) {
  step::EvalResult r;
  r.class_samples = {10, 4};
  r.class_correct = {8, 3};
  r.class_names = {"T-shirt/top", "Trouser"};
  EXPECT_EQ(format_class_lines(r), (std::vector<std::string>{"Accuracy of class 0 (T-shirt/top): 80% (8/10)",
                                                             "Accuracy of class 1 (Trouser): 75% (3/4)"}));
}

// cuDNN's benchmark mode searches algorithms for each new input shape; evaluation's shapes (the test batch,
// test-time views) are left to its heuristics, and the mode is back on for training afterwards.
TEST(Evaluation, SearchesNoCudnnAlgorithmsAndLeavesTheModeAsItWas) {
  const auto dataset = data::testing::index_dataset(6);
  data::LoaderOptions options;
  options.batch_size = 4;
  const auto batches = data::make_batch_loader(dataset, options, {false, "set"}, {false, "set"}, torch::kCPU);
  std::vector<bool> search_on;  // the mode as each forward pass saw it
  torch::nn::Sequential model(torch::nn::Linear(1, 10), torch::nn::Functional([&search_on](const torch::Tensor& x) {
                                search_on.push_back(at::globalContext().benchmarkCuDNN());
                                return x;
                              }));
  parallel::StrategyPlan plan;
  plan.replicas = {torch::Device(torch::kCPU)};
  const auto strategy = parallel::make_strategy(plan, {});
  optim::LossSpec loss;
  loss.classes = 10;

  at::globalContext().setBenchmarkCuDNN(true);
  const step::EvalResult result = evaluate(model, *batches, *strategy, loss, config::AmpMode::kOff);
  const bool after = at::globalContext().benchmarkCuDNN();
  at::globalContext().setBenchmarkCuDNN(false);

  EXPECT_EQ(result.samples, 6);
  EXPECT_EQ(search_on, std::vector<bool>(2, false));  // two batches: 4 and 2 samples
  EXPECT_TRUE(after);
}

// Predicts each index-dataset sample's class (index % 10) from its index, but
// for 6 of the last 20: 2 -> 5, 7 -> 3 and 8 -> 3, twice each.
torch::nn::Sequential predicting(int64_t classes) {
  return torch::nn::Sequential(torch::nn::Functional([classes](const torch::Tensor& x) {
    const torch::Tensor index = x.squeeze(1).to(torch::kInt64);
    torch::Tensor predicted = index % 10;
    const torch::Tensor late = index >= 20;
    for (const auto& [from, to] : {std::pair{2, 5}, std::pair{7, 3}, std::pair{8, 3}}) {
      predicted = torch::where(late.logical_and(index % 10 == from), torch::full_like(predicted, to), predicted);
    }
    return torch::one_hot(predicted, classes).to(torch::kFloat32);
  }));
}

step::EvalResult evaluate_with(int64_t classes) {
  data::LoaderOptions options;
  options.batch_size = 16;
  const auto batches =
      data::make_batch_loader(data::testing::index_dataset(40), options, {false, "set"}, {false, "set"}, torch::kCPU);
  parallel::StrategyPlan plan;
  plan.replicas = {torch::Device(torch::kCPU)};
  const auto strategy = parallel::make_strategy(plan, {});
  optim::LossSpec loss;
  loss.classes = classes;
  torch::nn::Sequential model = predicting(classes);
  return evaluate(model, *batches, *strategy, loss, config::AmpMode::kOff);
}

// Up to 100 classes the whole confusion matrix.
TEST(Evaluation, CountsTheTestSplitByTrueAndPredictedClass) {
  const step::EvalResult r = evaluate_with(10);
  EXPECT_EQ(r.correct, 34);
  ASSERT_EQ(r.confusion.size(), 100u);
  EXPECT_EQ(r.confusion[2 * 10 + 5], 2);
  EXPECT_EQ(r.confusion[7 * 10 + 3], 2);
  EXPECT_EQ(r.confusion[8 * 10 + 8], 2);
  EXPECT_EQ(r.confusion[0], 4);
  EXPECT_EQ(r.class_samples, std::vector<int64_t>(10, 4));
  EXPECT_EQ(r.class_correct, (std::vector<int64_t>{4, 4, 2, 4, 4, 4, 4, 2, 2, 4}));
  EXPECT_TRUE(r.top_confusions.empty());
}

// Issue 62 #6: past 100 classes, each class's counts and the commonest
// confusions, counted in memory that follows the samples: at the most classes
// a data set may have (100,000) the matrix would take 80 GB.
TEST(Evaluation, PastAHundredClassesCountsEachClassAndTheCommonestConfusions) {
  const step::EvalResult r = evaluate_with(100000);
  EXPECT_EQ(r.correct, 34);
  EXPECT_TRUE(r.confusion.empty());
  ASSERT_EQ(r.class_samples.size(), 100000u);
  EXPECT_EQ(r.class_samples[9], 4);
  EXPECT_EQ(r.class_samples[10], 0);
  EXPECT_EQ(r.class_correct[7], 2);
  ASSERT_EQ(r.top_confusions.size(), 3u);  // ties in order of the true class
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> expected{{2, 5, 2}, {7, 3, 2}, {8, 3, 2}};
  for (std::size_t i = 0; i < 3; ++i) {
    const step::Confusion& c = r.top_confusions[i];
    EXPECT_EQ(std::tuple(c.truth, c.predicted, c.count), expected[i]) << i;
  }
}

}  // namespace
}  // namespace gputrain::train
