#include "gputrain/train/optimizer_step.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <limits>

namespace gputrain::train {
namespace {

// The eager step built from its parts alone: no YAML, no trainer.
class EagerStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    model_ = torch::nn::Sequential(torch::nn::Linear(3, 2));
    optimizer_ = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(0.1));
    strategy_ = parallel::make_strategy({parallel::StrategyKind::kSingle, {torch::Device(torch::kCPU)}, "test"}, {});
    EagerStepParts parts;
    parts.strategy = strategy_.get();
    parts.model = model_;
    parts.optimizer = optimizer_.get();
    parts.scaler = &scaler_;
    parts.loss = {LossKind::kCrossEntropy, 2, {}};
    step_ = make_eager_step(parts);
  }
  torch::Tensor weights() const { return model_->parameters()[0].detach().clone(); }

  torch::nn::Sequential model_{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<parallel::Strategy> strategy_;
  GradScaler scaler_{GradScalerOptions().enabled(false)};
  std::unique_ptr<OptimizerStep> step_;
};

data::Batch batch(int64_t rows, float fill = 1) {
  return {torch::full({rows, 3}, fill), torch::zeros({rows}, torch::kInt64), 0};
}

// Two micro-batches of 2 rows make the same update as one batch of their 4.
TEST_F(EagerStepTest, MicroBatchesUpdateAsTheirCombinedBatch) {
  const torch::Tensor before = weights();
  torch::Tensor seen;
  const StepResult split = step_->run({batch(2, 1), batch(2, 2)}, [&](const torch::Tensor& loss) {
    seen = loss.clone();
    return parallel::StepFlags{};
  });
  ASSERT_EQ(split.sums.size(), 2u);
  EXPECT_EQ(split.sums[0].samples, 2);
  EXPECT_TRUE(seen.defined());  // the step's loss reaches the agreement: train.on_nan's one sync
  EXPECT_NEAR(seen.item<double>(), (split.sums[0].loss_sum + split.sums[1].loss_sum).item<double>(), 1e-6);
  const torch::Tensor after_split = weights();

  SetUp();  // the same start again
  ASSERT_TRUE(torch::equal(weights(), before));
  step_->run({data::Batch{torch::cat({batch(2, 1).inputs, batch(2, 2).inputs}), torch::zeros({4}, torch::kInt64), 0}},
             [](const torch::Tensor&) { return parallel::StepFlags{}; });
  EXPECT_TRUE(torch::allclose(weights(), after_split, 1e-6, 1e-7));
  EXPECT_FALSE(torch::equal(after_split, before));
}

// When the ranks agree the loss is not finite, nothing is updated.
TEST_F(EagerStepTest, ANonFiniteAgreementMakesNoUpdate) {
  const torch::Tensor before = weights();
  const StepResult r = step_->run({batch(2)}, [](const torch::Tensor&) {
    parallel::StepFlags flags;
    flags.non_finite = true;
    return flags;
  });
  EXPECT_TRUE(r.agreed.non_finite);
  EXPECT_TRUE(torch::equal(weights(), before));
}

}  // namespace
}  // namespace gputrain::train
