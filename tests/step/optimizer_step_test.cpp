#include "gputrain/step/optimizer_step.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gputrain/optim/loss.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/step/cuda_graph.h"
#include "gputrain/step/non_finite.h"

namespace gputrain::step {
namespace {

// A one-process step's parts, with a cross-entropy loss over 2 classes.
StepParts cpu_parts(parallel::Strategy* strategy, torch::nn::Sequential model, torch::optim::Optimizer* optimizer,
                    GradScaler* scaler) {
  StepParts parts;
  parts.strategy = strategy;
  parts.model = std::move(model);
  parts.optimizer = optimizer;
  parts.scaler = scaler;
  parts.loss = {optim::LossKind::kCrossEntropy, 2, {}};
  return parts;
}

// The eager step built from its parts alone: no YAML, no trainer.
class EagerStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(0);
    model_ = torch::nn::Sequential(torch::nn::Linear(3, 2));
    optimizer_ = std::make_unique<torch::optim::SGD>(model_->parameters(), torch::optim::SGDOptions(0.1));
    strategy_ = parallel::make_strategy({parallel::StrategyKind::kSingle, {torch::Device(torch::kCPU)}, "test"}, {});
    step_ = make_eager_step(cpu_parts(strategy_.get(), model_, optimizer_.get(), &scaler_));
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

// bench times the step that trains through its phase hook: each micro-batch's
// forward and backward, then the update, in the order they run, and the
// update is the one a step without the hook makes.
TEST_F(EagerStepTest, ThePhaseHookMarksEachPhaseAndChangesNothing) {
  step_->run({batch(2, 1), batch(2, 2)}, [](const torch::Tensor&) { return parallel::StepFlags{}; });
  const torch::Tensor without = weights();

  SetUp();
  std::vector<StepPhase> ended;
  StepParts parts = cpu_parts(strategy_.get(), model_, optimizer_.get(), &scaler_);
  parts.phase_done = [&](StepPhase phase) { ended.push_back(phase); };
  make_eager_step(parts)->run({batch(2, 1), batch(2, 2)}, [](const torch::Tensor&) { return parallel::StepFlags{}; });
  EXPECT_TRUE(torch::equal(weights(), without)) << "the same arithmetic, in the same process";
  const std::vector<StepPhase> expected{StepPhase::kForward, StepPhase::kBackward, StepPhase::kForward,
                                        StepPhase::kBackward, StepPhase::kOptimizer};
  EXPECT_EQ(ended, expected);
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

TEST(NonFiniteSteps, CountsTheStepsWhoseLossIsNotFiniteUntilRead) {
  NonFiniteSteps check(torch::Device(torch::kCPU), /*mask_sums=*/false);
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> losses{1.5, std::nan(""), 2.0, inf, -inf, 0.0};
  for (std::size_t i = 0; i < losses.size(); ++i) {
    check.check(torch::tensor(losses[i]));
    EXPECT_EQ(check.found().item<float>(), std::isfinite(losses[i]) ? 0 : 1) << losses[i];
    const double kept = check.kept(torch::tensor(losses[i])).item<double>();
    EXPECT_TRUE(kept == losses[i] || (std::isnan(kept) && std::isnan(losses[i]))) << "unmasked: " << kept;
    check.stepped(static_cast<int64_t>(i) + 11, 8);
  }
  const NonFiniteSeen seen = check.read();
  EXPECT_EQ(seen.steps, 3);
  EXPECT_EQ(seen.first, 12);
  EXPECT_EQ(seen.last, 15);
  EXPECT_EQ(seen.samples, 24);
  EXPECT_EQ(check.read().steps, 0);  // a read forgets what it returned

  NonFiniteSteps masked(torch::Device(torch::kCPU), /*mask_sums=*/true);
  masked.check(torch::tensor(inf));
  EXPECT_EQ(masked.kept(torch::tensor(7.0)).item<double>(), 0);
  EXPECT_FALSE(masked.kept(torch::Tensor()).defined());
  masked.check(torch::tensor(1.0));
  EXPECT_EQ(masked.kept(torch::tensor(7.0)).item<double>(), 7);
}

// More steps between reads than the device history holds: it is drained on the way.
TEST(NonFiniteSteps, ALongIntervalLosesNoStep) {
  NonFiniteSteps check(torch::Device(torch::kCPU), false);
  for (int64_t step = 1; step <= 2500; ++step) {
    check.check(torch::tensor(step == 3 || step == 2400 ? std::nan("") : 1.0));
    check.stepped(step, 1);
  }
  const NonFiniteSeen seen = check.read();
  EXPECT_EQ(seen.steps, 2);
  EXPECT_EQ(seen.first, 3);
  EXPECT_EQ(seen.last, 2400);
  torch::optim::SGD plain({torch::zeros({1}, torch::requires_grad())}, 0.1);
  EXPECT_FALSE(optim::skip_updates_when(plain, check.found()));  // LibTorch's own step: the host reads the loss instead
}

// The eager step with the device check: a NaN batch makes no update (the fused
// kernel reads found_inf), and the agreement gets no loss to read.
TEST(NonFiniteSteps, TheEagerStepSkipsANonFiniteBatchWithoutReadingIt) {
  for (const bool fused : {true, false}) {
    torch::manual_seed(0);
    torch::nn::Sequential model(torch::nn::Linear(3, 2));
    config::OptimConfig options;
    options.lr = 0.1;
    options.momentum = 0.9;
    options.fused = fused ? config::Switch::kOn : config::Switch::kOff;
    options.foreach = !fused;
    const auto optimizer = optim::make_optimizer(options, optim::param_groups(options, model->named_parameters()));
    NonFiniteSteps check(torch::Device(torch::kCPU), true);
    ASSERT_TRUE(optim::skip_updates_when(*optimizer, check.found()));
    const auto strategy = parallel::make_strategy({parallel::StrategyKind::kSingle, {torch::kCPU}, "test"}, {});
    GradScaler scaler(GradScalerOptions().enabled(false));
    StepParts parts = cpu_parts(strategy.get(), model, optimizer.get(), &scaler);
    parts.non_finite = &check;
    const auto step = make_eager_step(parts);
    const auto no_loss = [](const torch::Tensor& loss) {
      EXPECT_FALSE(loss.defined());
      return parallel::StepFlags{};
    };
    for (int i = 0; i < 5; ++i) {
      const torch::Tensor before = model->parameters()[0].detach().clone();
      const bool poisoned = i == 0 || i == 3;  // the first step too: SGD's momentum buffers start there
      const StepResult r = step->run({batch(4, poisoned ? std::nanf("") : 1.0F)}, no_loss);
      EXPECT_EQ(torch::equal(model->parameters()[0].detach(), before), poisoned) << "fused " << fused << " step " << i;
      EXPECT_EQ(r.sums.front().loss_sum.item<double>() == 0, poisoned);  // masked out of the metrics
      check.stepped(i + 1, 4);
    }
    const NonFiniteSeen seen = check.read();
    EXPECT_EQ(seen.steps, 2);
    EXPECT_EQ(seen.first, 1);
    EXPECT_EQ(seen.last, 4);
    EXPECT_TRUE(torch::isfinite(model->parameters()[0]).all().item<bool>());
  }
}

// A model with a layer the loss never reaches: its parameters keep an undefined gradient.
torch::nn::Sequential with_unused_layer() {
  torch::nn::Sequential model(torch::nn::Linear(3, 2));
  model->register_module("unused", torch::nn::Linear(2, 2));
  return model;
}

TEST(ParametersWithoutGradient, NamesTheParametersNoLossReaches) {
  torch::nn::Sequential model = with_unused_layer();
  EXPECT_EQ(parameters_without_gradient(*model).size(), 4u);  // before any backward
  model->forward(torch::ones({2, 3})).sum().backward();
  EXPECT_EQ(parameters_without_gradient(*model), (std::vector<std::string>{"unused.weight", "unused.bias"}));
  model[0]->parameters()[0].set_requires_grad(false);  // frozen: needs no gradient
  EXPECT_EQ(parameters_without_gradient(*model).size(), 2u);
}

// Issue 36 (F9): a parameter without a gradient aborted the run at its fourth
// step (the capture); now the step warns and keeps stepping eagerly.
TEST(GraphedStepFallback, AParameterWithoutAGradientStepsEagerly_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  torch::manual_seed(0);
  torch::nn::Sequential model = with_unused_layer();
  model->to(cuda);
  config::OptimConfig options;
  options.lr = 0.1;
  options.momentum = 0.9;
  options.fused = config::Switch::kOn;
  const auto optimizer = optim::make_optimizer(options, optim::param_groups(options, model->named_parameters()));
  const auto strategy = parallel::make_strategy({parallel::StrategyKind::kSingle, {cuda}, "test"}, {});
  GradScaler scaler(GradScalerOptions().enabled(false));
  const auto step = make_graphed_step(cpu_parts(strategy.get(), model, optimizer.get(), &scaler), 4, 1);
  // register_module adds no entry to Sequential's list: the layer is reached by name.
  const torch::Tensor unused = model->named_parameters()["unused.weight"].detach().clone();
  for (int i = 0; i < 6; ++i) {
    const torch::Tensor before = model[0]->parameters()[0].detach().clone();
    step->run({batch(4, static_cast<float>(i + 1))}, [](const torch::Tensor&) { return parallel::StepFlags{}; });
    EXPECT_FALSE(torch::equal(model[0]->parameters()[0].detach(), before)) << "step " << i;
  }
  EXPECT_TRUE(torch::equal(model->named_parameters()["unused.weight"].detach(), unused));
}

// Gradients of several shapes, one parameter left without a gradient.
std::vector<torch::Tensor> parameters_with_grads(double scale) {
  std::vector<torch::Tensor> params;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{7}, {3, 5}, {2, 3, 4, 4}, {}, {1}}) {
    torch::Tensor p = torch::randn(shape).requires_grad_();
    p.mutable_grad() = torch::randn(shape) * scale;
    params.push_back(p);
  }
  params.push_back(torch::randn({4}).requires_grad_());  // no gradient: not counted, not touched
  return params;
}

// The device-side clip (no host read, so a CUDA graph captures it) clips as
// LibTorch's torch::nn::utils::clip_grad_norm_ does, on norms above and
// below the limit, and returns the same norm.
TEST(ClipGradNorm, MatchesLibTorchsClipGradNorm) {
  for (const double scale : {0.01, 1.0, 100.0}) {
    for (const double max_norm : {0.5, 2.0, 1e3}) {
      SCOPED_TRACE(::testing::Message() << "scale " << scale << ", max_norm " << max_norm);
      torch::manual_seed(3);
      const std::vector<torch::Tensor> ours = parameters_with_grads(scale);
      torch::manual_seed(3);
      const std::vector<torch::Tensor> theirs = parameters_with_grads(scale);
      const torch::Tensor norm = clip_grad_norm(ours, max_norm);
      const double expected = torch::nn::utils::clip_grad_norm_(theirs, max_norm);
      EXPECT_EQ(norm.dim(), 0);
      EXPECT_NEAR(norm.item<double>(), expected, 1e-6 * std::max(1.0, expected));
      for (std::size_t i = 0; i + 1 < ours.size(); ++i) {
        EXPECT_TRUE(torch::allclose(ours[i].grad(), theirs[i].grad(), 1e-6, 1e-6)) << "parameter " << i;
      }
      EXPECT_FALSE(ours.back().grad().defined());
    }
  }
  EXPECT_EQ(clip_grad_norm({torch::ones({2}).requires_grad_()}, 1.0).item<double>(), 0.0) << "no gradients";
}

// Clipping inside the eager step: the update is made from the clipped gradient.
TEST(ClipGradNorm, TheEagerStepClipsBeforeItsUpdate) {
  auto step_with_clip = [](double grad_clip) {
    torch::manual_seed(0);
    torch::nn::Sequential model(torch::nn::Linear(3, 2));
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(1.0));
    auto strategy = parallel::make_strategy({parallel::StrategyKind::kSingle, {torch::Device(torch::kCPU)}, "t"}, {});
    GradScaler scaler{GradScalerOptions().enabled(false)};
    StepParts parts = cpu_parts(strategy.get(), model, &sgd, &scaler);
    parts.grad_clip = grad_clip;
    std::vector<torch::Tensor> before;
    for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
    make_eager_step(parts)->run({batch(4, 3)}, [](const torch::Tensor&) { return parallel::StepFlags{}; });
    std::vector<torch::Tensor> moved;  // lr 1: the update is the (clipped) gradient
    for (std::size_t i = 0; i < before.size(); ++i) moved.push_back((before[i] - model->parameters()[i]).flatten());
    return torch::cat(moved).norm().item<double>();
  };
  EXPECT_GT(step_with_clip(0), 0.1);
  EXPECT_NEAR(step_with_clip(0.1), 0.1, 1e-6);
}

// train.cuda_graph with train.accumulation_steps 3 on micro-batches of 4:
// one replay takes 3 micro-batches from one static buffer of 12 samples; the
// epoch's last group, with fewer micro-batches or a short last one, runs eagerly.
TEST(GraphPlan, CapturesTheMicroBatchesOfAStepInOneStaticBuffer) {
  const GraphPlan plan{4, 0, 3};
  EXPECT_TRUE(plan.replays({batch(4), batch(4), batch(4)}));
  EXPECT_FALSE(plan.replays({batch(4), batch(4)})) << "the epoch's last group, with fewer micro-batches";
  EXPECT_FALSE(plan.replays({batch(4), batch(4), batch(2)})) << "a short last micro-batch";
  EXPECT_FALSE(plan.replays({batch(4), batch(4), batch(4), batch(4)}));
  EXPECT_EQ(plan.buffer_shape(torch::zeros({4, 3, 32, 32})), (std::vector<int64_t>{12, 3, 32, 32}));
  EXPECT_EQ(plan.buffer_shape(torch::zeros({4}, torch::kInt64)), (std::vector<int64_t>{12}));
  const GraphPlan one{16};
  EXPECT_TRUE(one.replays({batch(16)}));
  EXPECT_FALSE(one.replays({batch(8)}));
  EXPECT_EQ(one.buffer_shape(torch::zeros({16, 20})), (std::vector<int64_t>{16, 20}));
}

}  // namespace
}  // namespace gputrain::step
