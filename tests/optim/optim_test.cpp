#include "gputrain/optim/loss.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/optim/schedule.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"

namespace gputrain::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;

config::OptimConfig optim(config::OptimizerName name) {
  config::OptimConfig config;
  config.name = name;
  return config;
}

config::OptimConfig schedule(config::SchedulerName scheduler, int64_t warmup_steps = 0) {
  config::OptimConfig config;
  config.lr = 0.1;
  config.scheduler = scheduler;
  config.warmup_steps = warmup_steps;
  return config;
}

template <typename Options>
const Options& options_of(torch::optim::Optimizer& optimizer) {
  return static_cast<const Options&>(optimizer.param_groups().at(0).options());
}

template <typename Fn>
std::string config_error_key(Fn&& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.key();
  }
  return "(no ConfigError)";
}

TEST(MakeOptimizer, SgdGetsItsHyperparameters) {
  config::OptimConfig config = optim(config::OptimizerName::kSgd);
  config.lr = 0.05;
  config.momentum = 0.9;
  config.weight_decay = 1e-4;
  config.nesterov = true;
  torch::nn::Linear layer(3, 1);
  const auto optimizer = make_optimizer(config, param_groups(config, layer->named_parameters()));
  ASSERT_NE(dynamic_cast<torch::optim::SGD*>(optimizer.get()), nullptr);
  const auto& options = options_of<torch::optim::SGDOptions>(*optimizer);
  EXPECT_DOUBLE_EQ(options.lr(), 0.05);
  EXPECT_DOUBLE_EQ(options.momentum(), 0.9);
  EXPECT_DOUBLE_EQ(options.weight_decay(), 1e-4);
  EXPECT_TRUE(options.nesterov());
}

template <typename Optimizer, typename Options>
void expect_adam_hyperparameters(config::OptimizerName name) {
  config::OptimConfig config = optim(name);
  config.lr = 3e-4;
  config.betas = {0.8, 0.95};
  config.eps = 1e-6;
  config.weight_decay = 0.05;
  torch::nn::Linear layer(3, 1);
  const auto optimizer = make_optimizer(config, param_groups(config, layer->named_parameters()));
  ASSERT_NE(dynamic_cast<Optimizer*>(optimizer.get()), nullptr) << name;
  const auto& options = options_of<Options>(*optimizer);
  EXPECT_DOUBLE_EQ(options.lr(), 3e-4);
  EXPECT_DOUBLE_EQ(std::get<0>(options.betas()), 0.8);
  EXPECT_DOUBLE_EQ(std::get<1>(options.betas()), 0.95);
  EXPECT_DOUBLE_EQ(options.eps(), 1e-6);
  EXPECT_DOUBLE_EQ(options.weight_decay(), 0.05);
}

TEST(MakeOptimizer, AdamGetsItsHyperparameters) {
  expect_adam_hyperparameters<torch::optim::Adam, torch::optim::AdamOptions>(config::OptimizerName::kAdam);
}

TEST(MakeOptimizer, AdamWIsTorchsAdamW) {
  expect_adam_hyperparameters<torch::optim::AdamW, torch::optim::AdamWOptions>(config::OptimizerName::kAdamW);
}

TEST(MakeOptimizer, OneStepOfEachChangesTheWeights) {
  for (const auto name : {config::OptimizerName::kSgd, config::OptimizerName::kAdam, config::OptimizerName::kAdamW}) {
    torch::manual_seed(0);
    torch::nn::Linear layer(3, 1);
    const torch::Tensor before = layer->weight.detach().clone();
    const auto optimizer = make_optimizer(optim(name), param_groups(optim(name), layer->named_parameters()));
    optimizer->zero_grad();
    layer->forward(torch::randn({4, 3})).pow(2).sum().backward();
    optimizer->step();
    EXPECT_FALSE(torch::equal(layer->weight.detach(), before)) << name;
  }
}

TEST(MakeOptimizer, RejectsBadBetas) {
  torch::nn::Linear layer(3, 1);
  config::OptimConfig config = optim(config::OptimizerName::kAdam);
  config.betas = {0.9};
  EXPECT_EQ(config_error_key([&] { make_optimizer(config, param_groups(config, layer->named_parameters())); }),
            "optim.betas");
}

// A parameter that trains for its first epochs only (the whitening bias) is a
// group of its own, with the decay and lr rules of its kind, whose lr the
// schedule sets to 0 from the first step of epoch `epochs` on.
TEST(LrSchedule, AGroupTrainedForItsFirstEpochsOnlyGetsLrZeroAfterThem) {
  torch::nn::Linear layer(3, 2);
  config::OptimConfig config = schedule(config::SchedulerName::kNone);
  config.bias_lr_multiplier = 2;
  const std::vector<ParamGroup> groups = param_groups(config, layer->named_parameters(), {{"bias", 2}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1].params.size(), 1u);
  EXPECT_TRUE(groups[1].params[0].is_same(layer->bias));
  EXPECT_EQ(groups[1].epochs, 2);
  EXPECT_EQ(groups[1].lr_multiplier, 2);
  EXPECT_EQ(trained_epochs(groups), (std::vector<int64_t>{0, 2}));
  const auto optimizer = make_optimizer(config, groups);
  const LrSchedule lr(config, /*steps_per_epoch=*/10, /*total_steps=*/50, lr_multipliers(groups),
                      trained_epochs(groups));
  lr.apply(*optimizer, 19);  // epoch 2's last step
  EXPECT_DOUBLE_EQ(optimizer->param_groups()[0].options().get_lr(), 0.1);
  EXPECT_DOUBLE_EQ(optimizer->param_groups()[1].options().get_lr(), 0.2);
  lr.apply(*optimizer, 20);
  EXPECT_DOUBLE_EQ(optimizer->param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(optimizer->param_groups()[1].options().get_lr(), 0.0);
}

// Issue 58: model.freeze bounded by model.freeze_epochs (a fine-tune's body):
// its parameters are groups of their own, after the others, at lr 0 until the
// first step of epoch `freeze_epochs`, then at the schedule's lr × the
// unfreeze multiplier; an SGD step at lr 0 leaves them as they are.
TEST(LrSchedule, AGroupFrozenForItsFirstEpochsTrainsAfterThemAtItsLowerRate) {
  torch::nn::Linear layer(3, 2);
  config::OptimConfig config = schedule(config::SchedulerName::kNone);
  config.momentum = 0.9;
  config.weight_decay = 0.1;
  const std::vector<ParamGroup> groups = param_groups(config, layer->named_parameters(), {}, {{"weight"}, 2, 0.1});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_TRUE(groups[0].params[0].is_same(layer->bias));
  EXPECT_TRUE(groups[1].params[0].is_same(layer->weight));
  EXPECT_EQ(groups[1].from_epoch, 2);
  EXPECT_DOUBLE_EQ(groups[1].lr_multiplier, 0.1);
  EXPECT_EQ(starting_epochs(groups), (std::vector<int64_t>{0, 2}));
  const auto optimizer = make_optimizer(config, groups);
  const LrSchedule lr(config, /*steps_per_epoch=*/10, /*total_steps=*/50, lr_multipliers(groups),
                      trained_epochs(groups), starting_epochs(groups));
  lr.apply(*optimizer, 19);  // epoch 2's last step
  EXPECT_DOUBLE_EQ(optimizer->param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(optimizer->param_groups()[1].options().get_lr(), 0.0);
  const torch::Tensor before = layer->weight.detach().clone();
  optimizer->zero_grad();
  layer->forward(torch::randn({4, 3})).pow(2).sum().backward();
  optimizer->step();
  EXPECT_TRUE(torch::equal(layer->weight.detach(), before));  // momentum and decay included
  lr.apply(*optimizer, 20);
  EXPECT_DOUBLE_EQ(optimizer->param_groups()[1].options().get_lr(), 0.1 * 0.1);
  optimizer->step();
  EXPECT_FALSE(torch::equal(layer->weight.detach(), before));
}

TEST(LrSchedule, NoneIsConstant) {
  const LrSchedule lr(schedule(config::SchedulerName::kNone), 10, 100);
  EXPECT_DOUBLE_EQ(lr.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(99), 0.1);
}

TEST(LrSchedule, StepDecaysEveryStepSizeEpochs) {
  config::OptimConfig config = schedule(config::SchedulerName::kStep);
  config.step_size = 2;
  config.gamma = 0.5;
  const LrSchedule lr(config, /*steps_per_epoch=*/10, /*total_steps=*/100);
  EXPECT_DOUBLE_EQ(lr.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(19), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(20), 0.05);
  EXPECT_DOUBLE_EQ(lr.lr_at(39), 0.05);
  EXPECT_DOUBLE_EQ(lr.lr_at(40), 0.025);
}

TEST(LrSchedule, CosineFallsFromLrToZero) {
  const LrSchedule lr(schedule(config::SchedulerName::kCosine), 10, 100);
  EXPECT_DOUBLE_EQ(lr.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(25), 0.1 * (1 + std::cos(kPi / 4)) / 2);
  EXPECT_DOUBLE_EQ(lr.lr_at(50), 0.05);
  EXPECT_NEAR(lr.lr_at(100), 0.0, 1e-12);
  EXPECT_NEAR(lr.lr_at(150), 0.0, 1e-12);
}

TEST(LrSchedule, OneCycleMatchesPyTorch) {
  // torch.optim.lr_scheduler.OneCycleLR(SGD(lr=0.1), max_lr=0.1, total_steps=100,
  // cycle_momentum=False), read before each step (torch 2.11).
  const LrSchedule lr(schedule(config::SchedulerName::kOneCycle), 10, 100);
  EXPECT_NEAR(lr.lr_at(0), 0.0040000000000000036, 1e-15);
  EXPECT_NEAR(lr.lr_at(10), 0.029516394846410082, 1e-15);
  EXPECT_NEAR(lr.lr_at(29), 0.1, 1e-15);
  EXPECT_NEAR(lr.lr_at(30), 0.09994965352845243, 1e-15);
  EXPECT_NEAR(lr.lr_at(50), 0.0793893450575732, 1e-15);
  EXPECT_NEAR(lr.lr_at(99), 4e-07, 1e-15);
}

TEST(LrSchedule, WarmupRampsLinearlyFromAboveZero) {
  const LrSchedule lr(schedule(config::SchedulerName::kNone, /*warmup_steps=*/4), 10, 100);
  EXPECT_DOUBLE_EQ(lr.lr_at(0), 0.025);
  EXPECT_DOUBLE_EQ(lr.lr_at(1), 0.05);
  EXPECT_DOUBLE_EQ(lr.lr_at(3), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(4), 0.1);
}

TEST(LrSchedule, WarmupScalesEverySchedule) {
  for (const auto name :
       {config::SchedulerName::kStep, config::SchedulerName::kCosine, config::SchedulerName::kOneCycle}) {
    const LrSchedule plain(schedule(name), 2, 40);
    const LrSchedule warm(schedule(name, /*warmup_steps=*/8), 2, 40);
    for (int64_t step = 0; step < 40; ++step) {
      const double factor = step < 8 ? (step + 1) / 8.0 : 1.0;
      EXPECT_DOUBLE_EQ(warm.lr_at(step), factor * plain.lr_at(step)) << name << " step " << step;
    }
    EXPECT_GT(warm.lr_at(0), 0.0) << name;
  }
}

TEST(LrSchedule, ApplySetsEveryParamGroup) {
  torch::nn::Linear a(3, 1), b(3, 1);
  torch::optim::SGD optimizer(
      {torch::optim::OptimizerParamGroup(a->parameters()), torch::optim::OptimizerParamGroup(b->parameters())},
      torch::optim::SGDOptions(1.0));
  const LrSchedule lr(schedule(config::SchedulerName::kCosine), 10, 100);
  lr.apply(optimizer, 50);
  ASSERT_EQ(optimizer.param_groups().size(), 2u);
  for (auto& group : optimizer.param_groups()) EXPECT_DOUBLE_EQ(group.options().get_lr(), 0.05);
}

TEST(LrSchedule, LinearWarmupDecayRisesHoldsAndFalls) {
  config::OptimConfig config = schedule(config::SchedulerName::kLinearWarmupDecay);
  config.warmup_fraction = 0.2;    // 20 of 100 steps
  config.cooldown_fraction = 0.3;  // 30
  const LrSchedule lr(config, 10, 100);
  EXPECT_DOUBLE_EQ(lr.lr_at(0), 0.1 / 20);  // the first step's is not 0
  EXPECT_DOUBLE_EQ(lr.lr_at(9), 0.1 * 10 / 20);
  EXPECT_DOUBLE_EQ(lr.lr_at(19), 0.1);  // the warm-up's last step
  EXPECT_DOUBLE_EQ(lr.lr_at(20), 0.1);
  EXPECT_DOUBLE_EQ(lr.lr_at(70), 0.1);  // the cool-down's first step, 30 before the end
  EXPECT_DOUBLE_EQ(lr.lr_at(71), 0.1 * 29 / 30);
  EXPECT_DOUBLE_EQ(lr.lr_at(85), 0.1 * 15 / 30);
  EXPECT_DOUBLE_EQ(lr.lr_at(99), 0.1 / 30);  // the last step's is not 0 either
  EXPECT_NEAR(lr.lr_at(100), 0.0, 1e-15);    // 0 once the run has ended
}

TEST(LrSchedule, LinearWarmupDecayMakesTrianglesAndAConstant) {
  config::OptimConfig config = schedule(config::SchedulerName::kLinearWarmupDecay);
  config.warmup_fraction = 0.5;
  config.cooldown_fraction = 0.5;
  const LrSchedule even(config, 5, 10);
  for (int64_t s = 0; s < 10; ++s) {
    EXPECT_DOUBLE_EQ(even.lr_at(s), 0.1 * static_cast<double>(std::min(s + 1, 10 - s)) / 5) << "step " << s;
  }
  config.warmup_fraction = 0.3;
  config.cooldown_fraction = 0.7;
  const LrSchedule lopsided(config, 5, 10);
  EXPECT_DOUBLE_EQ(lopsided.lr_at(0), 0.1 / 3);
  EXPECT_DOUBLE_EQ(lopsided.lr_at(2), 0.1);
  EXPECT_DOUBLE_EQ(lopsided.lr_at(3), 0.1);
  EXPECT_DOUBLE_EQ(lopsided.lr_at(4), 0.1 * 6 / 7);
  EXPECT_DOUBLE_EQ(lopsided.lr_at(9), 0.1 / 7);
  config.warmup_fraction = 0;
  config.cooldown_fraction = 0;
  const LrSchedule constant(config, 5, 10);
  for (int64_t s = 0; s < 10; ++s) EXPECT_DOUBLE_EQ(constant.lr_at(s), 0.1) << "step " << s;
}

// Linear 3 -> 4, LayerNorm, Linear 4 -> 2: two weight matrices, a norm weight and three biases.
torch::nn::Sequential net() {
  return torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})),
                               torch::nn::Linear(4, 2));
}

config::OptimConfig grouped(bool no_decay_bias_norm, double bias_lr_multiplier) {
  config::OptimConfig config;
  config.lr = 0.1;
  config.weight_decay = 5e-4;
  config.no_decay_bias_norm = no_decay_bias_norm;
  config.bias_lr_multiplier = bias_lr_multiplier;
  return config;
}

// Each group as the names its tensors have in `model`.
std::vector<std::vector<std::string>> names(const torch::nn::Module& model, const std::vector<ParamGroup>& groups) {
  std::vector<std::vector<std::string>> out;
  for (const ParamGroup& group : groups) {
    out.emplace_back();
    for (const torch::Tensor& p : group.params) {
      for (const auto& item : model.named_parameters()) {
        if (item.value().is_same(p)) out.back().push_back(item.key());
      }
    }
  }
  return out;
}

TEST(ParamGroups, SplitByDimensionAndName) {
  using Names = std::vector<std::vector<std::string>>;
  const auto model = net();
  const auto all = model->named_parameters();
  const auto none = param_groups(grouped(false, 1), all);
  EXPECT_EQ(names(*model, none), (Names{{"0.weight", "0.bias", "1.weight", "1.bias", "2.weight", "2.bias"}}));
  EXPECT_DOUBLE_EQ(none[0].weight_decay, 5e-4);
  EXPECT_DOUBLE_EQ(none[0].lr_multiplier, 1);

  const auto no_decay = param_groups(grouped(true, 1), all);
  EXPECT_EQ(names(*model, no_decay), (Names{{"0.weight", "2.weight"}, {"0.bias", "1.weight", "1.bias", "2.bias"}}));
  EXPECT_EQ(describe(no_decay),
            "2 parameter groups: 2 tensors with weight decay 0.0005, lr × 1; 4 tensors of dim <= 1 without weight "
            "decay, lr × 1");

  const auto bias_lr = param_groups(grouped(false, 64), all);
  EXPECT_EQ(names(*model, bias_lr), (Names{{"0.weight", "1.weight", "2.weight"}, {"0.bias", "1.bias", "2.bias"}}));
  EXPECT_EQ(describe(bias_lr),
            "2 parameter groups: 3 tensors with weight decay 0.0005, lr × 1; 3 biases with weight decay 0.0005, lr "
            "× 64");

  const auto both = param_groups(grouped(true, 64), all);
  EXPECT_EQ(names(*model, both), (Names{{"0.weight", "2.weight"}, {"1.weight"}, {"0.bias", "1.bias", "2.bias"}}));
  EXPECT_EQ(describe(both),
            "3 parameter groups: 2 tensors with weight decay 0.0005, lr × 1; 1 tensor of dim <= 1 without weight "
            "decay, lr × 1; 3 biases without weight decay, lr × 64");
  EXPECT_EQ(lr_multipliers(both), (std::vector<double>{1, 1, 64}));
}

template <typename Options>
void expect_group_options(torch::optim::Optimizer& optimizer, const std::vector<std::pair<double, double>>& lr_decay,
                          const std::string& label) {
  ASSERT_EQ(optimizer.param_groups().size(), lr_decay.size()) << label;
  for (std::size_t g = 0; g < lr_decay.size(); ++g) {
    const auto& options = static_cast<const Options&>(optimizer.param_groups()[g].options());
    EXPECT_DOUBLE_EQ(options.lr(), lr_decay[g].first) << label << " group " << g;
    EXPECT_DOUBLE_EQ(options.weight_decay(), lr_decay[g].second) << label << " group " << g;
  }
}

// model.freeze: a parameter that does not require a gradient is in no group, so no optimizer updates it.
TEST(ParamGroups, LeaveFrozenParametersOut) {
  using Names = std::vector<std::vector<std::string>>;
  const auto model = net();
  model->named_parameters()["0.weight"].set_requires_grad(false);
  model->named_parameters()["1.bias"].set_requires_grad(false);
  const auto groups = param_groups(grouped(true, 1), model->named_parameters());
  EXPECT_EQ(names(*model, groups), (Names{{"2.weight"}, {"0.bias", "1.weight", "2.bias"}}));
}

TEST(ParamGroups, OptimizerGroupsCarryTheirDecayAndLr) {
  const auto model = net();
  const std::vector<std::pair<double, double>> expected{{0.1, 5e-4}, {0.1, 0}, {6.4, 0}};
  for (const bool fused : {false, true}) {
    config::OptimConfig config = grouped(true, 64);
    config.fused = fused ? config::Switch::kOn : config::Switch::kOff;
    const auto groups = param_groups(config, model->named_parameters());
    const std::string label = fused ? "fused" : "plain";
    config.name = config::OptimizerName::kSgd;
    expect_group_options<torch::optim::SGDOptions>(*make_optimizer(config, groups), expected, "sgd " + label);
    config.name = config::OptimizerName::kAdam;
    expect_group_options<torch::optim::AdamOptions>(*make_optimizer(config, groups), expected, "adam " + label);
    config.name = config::OptimizerName::kAdamW;
    expect_group_options<torch::optim::AdamWOptions>(*make_optimizer(config, groups), expected, "adamw " + label);
  }
}

// w <- w - lr * (g + wd * w) for the weight; b <- b - lr * g for the bias.
TEST(ParamGroups, OneSgdStepDecaysTheWeightButNotTheBias) {
  for (const std::string kernel : {"plain", "foreach", "fused"}) {
    torch::nn::Linear layer(2, 1);
    config::OptimConfig config = optim(config::OptimizerName::kSgd);
    config.lr = 0.5;
    config.weight_decay = 0.1;
    config.no_decay_bias_norm = true;
    config.foreach = kernel == "foreach";
    config.fused = kernel == "fused" ? config::Switch::kOn : config::Switch::kOff;
    const auto optimizer = make_optimizer(config, param_groups(config, layer->named_parameters()));
    {
      torch::NoGradGuard no_grad;
      layer->weight.copy_(torch::tensor({{1.0F, -2.0F}}));
      layer->bias.copy_(torch::tensor({3.0F}));
    }
    layer->weight.mutable_grad() = torch::tensor({{0.5F, 0.25F}});
    layer->bias.mutable_grad() = torch::tensor({1.0F});
    optimizer->step();
    EXPECT_TRUE(torch::allclose(layer->weight.detach(), torch::tensor({{1 - 0.5F * 0.6F, -2 - 0.5F * 0.05F}})))
        << kernel << ": " << layer->weight;
    EXPECT_TRUE(torch::allclose(layer->bias.detach(), torch::tensor({2.5F}))) << kernel << ": " << layer->bias;
  }
}

TEST(LrSchedule, BiasLrMultiplierScalesEveryStepOfTheSchedule) {
  const auto model = net();
  for (const auto name : {config::SchedulerName::kCosine, config::SchedulerName::kLinearWarmupDecay}) {
    config::OptimConfig config = grouped(true, 64);
    config.scheduler = name;
    config.warmup_fraction = 0.1;
    config.cooldown_fraction = 0.5;
    const auto groups = param_groups(config, model->named_parameters());
    const auto optimizer = make_optimizer(config, groups);
    const LrSchedule lr(config, 10, 100, lr_multipliers(groups));
    for (const int64_t step : {0, 5, 9, 30, 50, 75, 99}) {
      lr.apply(*optimizer, step);
      const auto& applied = optimizer->param_groups();
      ASSERT_EQ(applied.size(), 3u);
      EXPECT_GT(lr.lr_at(step), 0) << name << " step " << step;
      EXPECT_DOUBLE_EQ(applied[0].options().get_lr(), lr.lr_at(step)) << name << " step " << step;
      EXPECT_DOUBLE_EQ(applied[1].options().get_lr(), lr.lr_at(step)) << name << " step " << step;
      EXPECT_DOUBLE_EQ(applied[2].options().get_lr(), 64 * lr.lr_at(step)) << name << " step " << step;
    }
  }
}

TEST(Loss, AutoFollowsTheTargets) {
  EXPECT_EQ(resolve_loss(config::LossName::kAuto, true), LossKind::kCrossEntropy);
  EXPECT_EQ(resolve_loss(config::LossName::kAuto, false), LossKind::kMse);
  EXPECT_EQ(resolve_loss(config::LossName::kCrossEntropy, true), LossKind::kCrossEntropy);
  EXPECT_EQ(resolve_loss(config::LossName::kMse, false), LossKind::kMse);
}

TEST(Loss, AMismatchWithTheTargetsIsAConfigError) {
  try {
    resolve_loss(config::LossName::kMse, true);
    ADD_FAILURE() << "mse on class labels was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "train.loss: mse needs real-valued targets, but the data set's targets are class labels "
              "(use cross_entropy or auto)");
  }
  EXPECT_EQ(config_error_key([] { resolve_loss(config::LossName::kCrossEntropy, false); }), "train.loss");
}

LossSpec spec(LossKind kind, torch::Tensor class_weights = {}, double label_smoothing = 0) {
  LossSpec loss;
  loss.kind = kind;
  loss.class_weights = std::move(class_weights);
  loss.label_smoothing = label_smoothing;
  return loss;
}

TEST(Loss, CrossEntropySumIsTheMeanTimesN) {
  torch::manual_seed(0);
  const torch::Tensor outputs = torch::randn({6, 4});
  const torch::Tensor targets = torch::randint(4, {6});
  const torch::Tensor mean = torch::nn::functional::cross_entropy(outputs, targets);
  EXPECT_TRUE(torch::allclose(loss_sum(spec(LossKind::kCrossEntropy), outputs, targets), mean * 6));
}

// Seed 002 weights its two classes [1, 3]: over N the weighted sum is PyTorch's weighted mean.
TEST(Loss, ClassWeightedSumOverNIsPyTorchsWeightedMean) {
  torch::manual_seed(4);
  const torch::Tensor outputs = torch::randn({6, 2});
  const torch::Tensor targets = torch::tensor({0, 1, 1, 0, 1, 1}, torch::kInt64);
  const torch::Tensor weights = torch::tensor({1.0, 3.0}, torch::kFloat32);
  namespace F = torch::nn::functional;
  const torch::Tensor pytorch = F::cross_entropy(outputs, targets, F::CrossEntropyFuncOptions().weight(weights));
  EXPECT_TRUE(torch::allclose(loss_sum(spec(LossKind::kCrossEntropy, weights), outputs, targets) / 6, pytorch));
  EXPECT_FALSE(torch::allclose(loss_sum(spec(LossKind::kCrossEntropy), outputs, targets) / 6, pytorch));
}

// Each sample: (1 - e) x -log p[target] + e / C x the sum over classes of -log p[c], by hand.
TEST(Loss, LabelSmoothingSpreadsEOverEveryClass) {
  torch::manual_seed(2);
  const torch::Tensor outputs = torch::randn({5, 4}, torch::kFloat64);
  const torch::Tensor targets = torch::tensor({0, 3, 1, 1, 2}, torch::kInt64);
  const double e = 0.2;
  const torch::Tensor log_p = torch::log_softmax(outputs, 1);
  double by_hand = 0;
  for (int64_t i = 0; i < 5; ++i) {
    const double own = -log_p[i][targets[i].item<int64_t>()].item<double>();
    by_hand += (1 - e) * own + e / 4 * (-log_p[i].sum().item<double>());
  }
  EXPECT_NEAR(loss_sum(spec(LossKind::kCrossEntropy, {}, e), outputs, targets).item<double>(), by_hand, 1e-12);
  EXPECT_GT(std::abs(loss_sum(spec(LossKind::kCrossEntropy), outputs, targets).item<double>() - by_hand), 1e-3);
  // With class weights too: over N, PyTorch's CrossEntropyLoss(weight, label_smoothing) mean.
  namespace F = torch::nn::functional;
  const torch::Tensor weights = torch::tensor({1.0, 2.0, 0.5, 3.0}, torch::kFloat64);
  const torch::Tensor pytorch =
      F::cross_entropy(outputs, targets, F::CrossEntropyFuncOptions().weight(weights).label_smoothing(e));
  EXPECT_TRUE(torch::allclose(loss_sum(spec(LossKind::kCrossEntropy, weights, e), outputs, targets) / 5, pytorch));
}

TEST(Loss, MseSumOverNIsPyTorchsMean) {
  torch::manual_seed(0);
  for (const int64_t values : {1, 3}) {
    const torch::Tensor outputs = torch::randn({6, values});
    const torch::Tensor targets = torch::randn({6, values});
    const torch::Tensor sum = loss_sum(spec(LossKind::kMse), outputs, targets);
    EXPECT_TRUE(torch::allclose(sum / 6, torch::nn::functional::mse_loss(outputs, targets))) << values;
    EXPECT_TRUE(torch::allclose(sum, (outputs - targets).pow(2).mean(1).sum())) << values;
  }
}

// The trainer backpropagates a summed loss with 1/N as its incoming gradient:
// the same gradients, bit for bit, as dividing the sum by N first, for each
// batch size it meets (a full batch, then the epoch's shorter last one).
TEST(MeanBackward, SameGradientsAsDividingFirst) {
  torch::manual_seed(0);
  torch::nn::Linear divided(5, 3), weighted(5, 3);
  weighted->weight.data().copy_(divided->weight.data());
  weighted->bias.data().copy_(divided->bias.data());
  MeanBackward backward_mean;
  for (const int64_t n : {7, 7, 2}) {
    const torch::Tensor inputs = torch::randn({n, 5});
    const torch::Tensor targets = torch::randint(3, {n});
    divided->zero_grad();
    weighted->zero_grad();
    (loss_sum(spec(LossKind::kCrossEntropy), divided->forward(inputs), targets) / static_cast<double>(n)).backward();
    backward_mean(loss_sum(spec(LossKind::kCrossEntropy), weighted->forward(inputs), targets), n);
    EXPECT_TRUE(torch::equal(weighted->weight.grad(), divided->weight.grad())) << n;
    EXPECT_TRUE(torch::equal(weighted->bias.grad(), divided->bias.grad())) << n;
  }
}

// The CPU's host count against the tensor ops it replaces: ties (small
// integers), NaN rows (NaN counts as largest, the first one wins), every
// floating type, strided logits.
TEST(CorrectCount, CountsAsArgmaxDoesOnTheCpu) {
  torch::manual_seed(7);
  const int64_t rows = 300, classes = 4;
  torch::Tensor logits = torch::randint(0, 3, {rows, classes}).to(torch::kFloat32);
  logits.index_put_({torch::indexing::Slice(0, 40), 2}, NAN);
  logits.index_put_({torch::indexing::Slice(20, 30), 0}, NAN);
  logits.index_put_({torch::indexing::Slice(30, 35), torch::indexing::Slice()}, NAN);
  const torch::Tensor targets = torch::randint(0, classes, {rows});
  for (const auto dtype : {torch::kFloat32, torch::kFloat64, torch::kBFloat16, torch::kFloat16}) {
    const torch::Tensor typed = logits.to(dtype);
    const torch::Tensor strided = typed.t().contiguous().t();  // column-major: the same logits
    ASSERT_FALSE(strided.is_contiguous());
    for (const torch::Tensor& outputs : {typed, strided}) {
      const torch::Tensor counted = correct_count(outputs, targets, /*classification=*/true);
      EXPECT_EQ(counted.dim(), 0);
      EXPECT_EQ(counted.scalar_type(), torch::kInt64);
      EXPECT_EQ(counted.item<int64_t>(), outputs.argmax(1).eq(targets).sum().item<int64_t>()) << dtype;
    }
  }
  EXPECT_FALSE(correct_count(logits, targets, /*classification=*/false).defined());
}

TEST(Loss, MseRefusesShapesThatWouldBroadcast) {
  EXPECT_THROW(loss_sum(spec(LossKind::kMse), torch::zeros({6, 1}), torch::zeros({6})), InternalError);
}

}  // namespace
}  // namespace gputrain::optim
