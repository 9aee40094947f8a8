#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

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

}  // namespace
}  // namespace gputrain::train
