// The speed-record techniques on their own: the weight average against a
// reference update, the stop rules' verdicts, and test-time augmentation's
// views and averaged logits.
#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <cmath>

#include "gputrain/common/error.h"

#include "gputrain/parallel/strategy.h"
#include "gputrain/train/evaluate.h"
#include "gputrain/train/stop_rules.h"
#include "gputrain/train/weight_average.h"

namespace gputrain::train {
namespace {

// Moves every weight and buffer of the model somewhere new, as a step would.
void perturb(torch::nn::Module& model, double by) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& t : weights_and_buffers(model)) {
    if (torch::isFloatingType(t.scalar_type())) {
      t.add_(torch::full_like(t, by));
    } else {
      t.add_(1);
    }
  }
}

TEST(WeightAverage, FollowsTheReferenceUpdateOverParametersAndBuffers) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(3, 2), torch::nn::BatchNorm1d(2));
  WeightAverage average(*model, WeightAverageOptions{0.9, 1, 1});
  const std::vector<torch::Tensor> live = weights_and_buffers(*model);
  std::vector<torch::Tensor> expected;
  EXPECT_FALSE(average.started());
  for (int step = 1; step <= 4; ++step) {
    perturb(*model, 0.5 * step);
    average.after_step(step, /*epoch=*/1);
    for (std::size_t i = 0; i < live.size(); ++i) {
      const torch::Tensor now = live[i].detach().clone();
      if (step == 1) {
        expected.push_back(now);  // the first update copies
      } else if (torch::isFloatingType(now.scalar_type())) {
        expected[i] = 0.9 * expected[i] + 0.1 * now;
      } else {
        expected[i] = now;  // num_batches_tracked is copied
      }
    }
  }
  ASSERT_TRUE(average.started());
  ASSERT_EQ(average.state().size(), live.size());
  ASSERT_EQ(live.size(), 7u);  // weight, bias; bn weight, bias; running mean, var, count
  for (std::size_t i = 0; i < live.size(); ++i) {
    EXPECT_TRUE(torch::allclose(average.state()[i], expected[i], 1e-6, 1e-6)) << "tensor " << i;
  }
}

TEST(WeightAverage, UpdatesFromItsStartEpochEveryNthStep) {
  torch::nn::Sequential model(torch::nn::Linear(2, 1));
  WeightAverage average(*model, WeightAverageOptions{0.5, 2, 3});
  average.after_step(3, 1);
  EXPECT_FALSE(average.started()) << "epoch 1 is before start_epoch 2";
  average.after_step(4, 2);
  EXPECT_FALSE(average.started()) << "step 4 is not a multiple of every = 3";
  average.after_step(6, 2);
  EXPECT_TRUE(average.started());
  perturb(*model, 2.0);
  const torch::Tensor before = average.state()[0].clone();
  average.after_step(7, 2);
  average.after_step(8, 2);
  EXPECT_TRUE(torch::equal(average.state()[0], before));
  average.after_step(9, 2);
  EXPECT_TRUE(torch::allclose(average.state()[0], before + 1.0));  // half way to the weights 2.0 away
}

TEST(WeightAverage, SwapsWithTheModelAndBack) {
  torch::nn::Sequential model(torch::nn::Linear(2, 2));
  WeightAverage average(*model, WeightAverageOptions{0.9, 1, 1});
  average.update();
  const torch::Tensor averaged = average.state()[0].clone();
  perturb(*model, 1.0);
  const torch::Tensor trained = model->parameters()[0].detach().clone();
  average.swap_into_model();
  EXPECT_TRUE(torch::equal(model->parameters()[0], averaged));
  average.swap_into_model();
  EXPECT_TRUE(torch::equal(model->parameters()[0], trained));
  EXPECT_TRUE(torch::equal(average.state()[0], averaged));
  average.copy_into_model();
  EXPECT_TRUE(torch::equal(model->parameters()[0], averaged));
}

TEST(WeightAverage, ACheckpointForAnotherModelIsRefused) {
  torch::nn::Sequential model(torch::nn::Linear(2, 2));
  WeightAverage average(*model, WeightAverageOptions{});
  EXPECT_THROW(average.load({torch::zeros({2, 2})}, "c.ckpt"), CheckpointError);                     // too few
  EXPECT_THROW(average.load({torch::zeros({3, 2}), torch::zeros({2})}, "c.ckpt"), CheckpointError);  // shape
  average.load({torch::ones({2, 2}), torch::ones({2})}, "c.ckpt");
  EXPECT_TRUE(average.started());
}

step::EvalResult scored(double accuracy, double loss = 1.0) {
  step::EvalResult r;
  r.samples = 1000;
  r.correct = std::llround(accuracy * 1000);
  r.loss_sum = loss * 1000;
  return r;
}

TEST(StopRules, TheTargetIsReachedAtTheFirstEvaluationAtOrAboveIt) {
  StopRules rules(StopRulesOptions{0.9, 0, 0, true});
  EXPECT_FALSE(rules.judge(scored(0.85)).stop());
  EXPECT_FALSE(rules.judge(scored(0.899)).stop());
  const StopVerdict verdict = rules.judge(scored(0.9));
  EXPECT_TRUE(verdict.target_reached);
  EXPECT_TRUE(verdict.stop());
}

TEST(StopRules, PatienceCountsEvaluationsWithoutAnImprovementBeyondMinDelta) {
  StopRules rules(StopRulesOptions{0, 2, 0.01, true});
  EXPECT_TRUE(rules.judge(scored(0.50)).improved);  // the first is always the best so far
  EXPECT_TRUE(rules.judge(scored(0.60)).improved);
  StopVerdict v = rules.judge(scored(0.605));  // within min_delta: no improvement
  EXPECT_FALSE(v.improved);
  EXPECT_FALSE(v.stop());
  EXPECT_EQ(rules.evals_since_best(), 1);
  v = rules.judge(scored(0.615));  // beyond the best (0.60) by more than 0.01
  EXPECT_TRUE(v.improved);
  EXPECT_EQ(rules.evals_since_best(), 0);
  EXPECT_FALSE(rules.judge(scored(0.3)).stop());
  v = rules.judge(scored(0.62));
  EXPECT_TRUE(v.patience_used_up) << "two evaluations in a row without an improvement";
  EXPECT_DOUBLE_EQ(*rules.best(), 0.615);
}

TEST(StopRules, TheLossMetricWantsLowerAndResumesWhereItWas) {
  StopRules rules(StopRulesOptions{0, 1, 0, false});
  EXPECT_TRUE(rules.judge(scored(0.5, 2.0)).improved);
  EXPECT_TRUE(rules.judge(scored(0.1, 1.0)).improved) << "a lower loss is better, whatever the accuracy";
  StopRules resumed(StopRulesOptions{0, 1, 0, false});
  resumed.restore(rules.best(), rules.evals_since_best());
  EXPECT_TRUE(resumed.judge(scored(0.9, 1.5)).patience_used_up);
}

torch::Tensor image3x3(std::vector<float> values) { return torch::tensor(values).reshape({1, 1, 3, 3}); }

TEST(TestTimeAugmentation, ViewsAreShiftsWithMirroredEdgesAndTheirFlips) {
  // One 1x3x3 image holding 0..8 row by row.
  const torch::Tensor image = torch::arange(9, torch::kFloat32).reshape({1, 1, 3, 3});
  EXPECT_EQ(tta_views(image, {}).size(), 1u);
  EXPECT_EQ(tta_views(image, {true, 0}).size(), 2u);
  EXPECT_EQ(tta_views(image, {false, 1}).size(), 5u);
  const std::vector<torch::Tensor> views = tta_views(image, {true, 1});
  ASSERT_EQ(views.size(), 10u);
  EXPECT_TRUE(torch::equal(views[0], image));
  // Shifted by -1 row: the view starts one row above, where reflect padding mirrors row 1.
  EXPECT_TRUE(torch::equal(views[1], image3x3({3, 4, 5, 0, 1, 2, 3, 4, 5})));
  EXPECT_TRUE(torch::equal(views[2], image3x3({3, 4, 5, 6, 7, 8, 3, 4, 5})));
  EXPECT_TRUE(torch::equal(views[3], image3x3({1, 0, 1, 4, 3, 4, 7, 6, 7})));
  EXPECT_TRUE(torch::equal(views[4], image3x3({1, 2, 1, 4, 5, 4, 7, 8, 7})));
  for (std::size_t i = 0; i < 5; ++i) EXPECT_TRUE(torch::equal(views[5 + i], views[i].flip({3}))) << i;
}

TEST(TestTimeAugmentation, OutputsAreTheMeanOfEveryViewsLogits) {
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 3)), torch::nn::Flatten(),
                              torch::nn::Linear(2 * 2 * 2, 4));
  model->eval();
  torch::NoGradGuard no_grad;
  parallel::StrategyPlan plan;
  plan.replicas = {torch::Device(torch::kCPU)};
  const auto strategy = parallel::make_strategy(plan, {});
  const torch::Tensor images = torch::randn({5, 1, 4, 4});
  const TestTimeAugmentation tta{true, 1};
  torch::Tensor expected = torch::zeros({5, 4});
  for (const torch::Tensor& view : tta_views(images, tta)) expected += model->forward(view);
  expected /= 10;
  EXPECT_TRUE(torch::allclose(test_time_outputs(model, *strategy, images, tta), expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(test_time_outputs(model, *strategy, images, {}), model->forward(images)));
}

}  // namespace
}  // namespace gputrain::train
