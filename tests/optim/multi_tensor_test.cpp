// optim.foreach and optim.fused against LibTorch's own SGD, Adam and AdamW:
// the same update within rounding, and state a plain optimizer can load.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>

#include <cmath>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gputrain/optim/multi_tensor.h"
#include "gputrain/optim/optimizer.h"

namespace gputrain::optim {
namespace {

struct Case {
  std::string label;
  config::OptimConfig config;
};

config::OptimConfig make(config::OptimizerName name, double lr, double momentum, double weight_decay,
                         bool nesterov = false) {
  config::OptimConfig c;
  c.name = name;
  c.lr = lr;
  c.momentum = momentum;
  c.weight_decay = weight_decay;
  c.nesterov = nesterov;
  return c;
}

// Three parameter groups: decayed tensors, an undecayed norm weight, undecayed biases at lr × 4.
config::OptimConfig grouped(config::OptimConfig c) {
  c.no_decay_bias_norm = true;
  c.bias_lr_multiplier = 4;
  return c;
}

std::vector<Case> cases() {
  return {{"sgd", make(config::OptimizerName::kSgd, 0.1, 0, 0)},
          {"sgd momentum", make(config::OptimizerName::kSgd, 0.05, 0.9, 0)},
          {"sgd nesterov decay", make(config::OptimizerName::kSgd, 0.05, 0.9, 1e-2, true)},
          {"sgd nesterov decay groups", grouped(make(config::OptimizerName::kSgd, 0.05, 0.9, 1e-2, true))},
          {"adam", make(config::OptimizerName::kAdam, 1e-2, 0, 0)},
          {"adam decay", make(config::OptimizerName::kAdam, 1e-2, 0, 1e-2)},
          {"adam decay groups", grouped(make(config::OptimizerName::kAdam, 1e-2, 0, 1e-2))},
          {"adamw decay", make(config::OptimizerName::kAdamW, 1e-2, 0, 5e-2)},
          {"adamw decay groups", grouped(make(config::OptimizerName::kAdamW, 1e-2, 0, 5e-2))}};
}

config::OptimConfig with_kernel(config::OptimConfig c, const std::string& kernel) {
  c.foreach = kernel == "foreach";
  c.fused = kernel == "fused" ? config::Switch::kOn : config::Switch::kOff;
  return c;
}

// Four parameters of different shapes (one 4-D, like a convolution's
// weight), named as a model would name them (kNames).
std::vector<torch::Tensor> parameters() {
  auto gen = at::detail::createCPUGenerator(5);
  return {torch::randn({4, 3}, gen).requires_grad_(), torch::randn({3}, gen).requires_grad_(),
          torch::randn({2, 2, 3, 3}, gen).requires_grad_(), torch::randn({5}, gen).requires_grad_()};
}
const std::vector<std::string> kNames{"fc.weight", "fc.bias", "conv.weight", "norm.weight"};

// make_optimizer over `params` in the groups `c` asks for.
std::unique_ptr<torch::optim::Optimizer> optimizer_for(const config::OptimConfig& c,
                                                       const std::vector<torch::Tensor>& params) {
  torch::OrderedDict<std::string, torch::Tensor> named;
  for (std::size_t i = 0; i < params.size(); ++i) named.insert(kNames.at(i), params[i]);
  return make_optimizer(c, param_groups(c, named));
}

// `steps` steps with gradients from a fixed generator and a learning rate that
// changes every other step, as a schedule does (the fused kernels' device copy
// of it must follow the changes and hold between them). `skip` leaves
// parameter 1 without a gradient on that step.
void run(torch::optim::Optimizer& optimizer, std::vector<torch::Tensor>& params, int steps, uint64_t seed,
         int skip = -1) {
  auto gen = at::detail::createCPUGenerator(seed);
  for (int s = 0; s < steps; ++s) {
    if (s % 2 == 1) {
      for (auto& group : optimizer.param_groups()) group.options().set_lr(group.options().get_lr() * 0.9);
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() = s == skip && i == 1 ? torch::Tensor() : torch::randn(params[i].sizes(), gen);
    }
    optimizer.step();
  }
}

void expect_close(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-6))
        << what << ", parameter " << i << ": max difference " << (a[i] - b[i]).abs().max().item<double>();
  }
}

TEST(MultiTensorOptimizers, SameUpdateAsLibTorchsLoop) {
  for (const Case& c : cases()) {
    auto expected = parameters();
    run(*optimizer_for(c.config, expected), expected, 6, 9, /*skip=*/2);
    for (const std::string kernel : {"foreach", "fused"}) {
      auto params = parameters();
      run(*optimizer_for(with_kernel(c.config, kernel), params), params, 6, 9, /*skip=*/2);
      expect_close(params, expected, c.label + " " + kernel);
    }
  }
}

// The optimizer's state tensors (momentum buffers; Adam's moments), copied.
std::vector<torch::Tensor> state_tensors(torch::optim::Optimizer& optimizer) {
  std::vector<torch::Tensor> out;
  for (const auto& [key, state] : optimizer.state()) {
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      out.push_back(sgd->momentum_buffer().clone());
    } else if (const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      out.insert(out.end(), {adam->exp_avg().clone(), adam->exp_avg_sq().clone()});
    } else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state.get())) {
      out.insert(out.end(), {adamw->exp_avg().clone(), adamw->exp_avg_sq().clone()});
    }
  }
  return out;
}

// What a CUDA graph captures of the foreach step: once every parameter has a
// gradient (and SGD's momentum buffers have started) prepare_step() says a
// captured launch_step() replays right, since the learning rate, the step
// count and train.on_nan's skip are read on the device. A skipped step leaves
// the weights and every state tensor as they were, NaN gradients included.
// SGD then goes on as LibTorch's loop without the skipped step; Adam's step
// count includes it, as the fused kernel's does (the host cannot know).
TEST(MultiTensorOptimizers, TheForeachStepReadsItsPerStepValuesFromTheDevice) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.label);
    auto params = parameters();
    const auto optimizer = optimizer_for(with_kernel(c.config, "foreach"), params);
    auto& split = dynamic_cast<detail::SplitStep&>(*optimizer);
    const torch::Tensor found = torch::zeros({});
    split.skip_when(found);
    run(*optimizer, params, 2, 9);
    for (auto& p : params) p.mutable_grad() = torch::full(p.sizes(), NAN);
    std::vector<torch::Tensor> before;
    for (const auto& p : params) before.push_back(p.detach().clone());
    const std::vector<torch::Tensor> state = state_tensors(*optimizer);
    found.fill_(1);
    EXPECT_TRUE(split.prepare_step()) << "replays: every per-step value is read on the device";
    split.launch_step();
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(params[i].equal(before[i])) << "parameter " << i;
    const std::vector<torch::Tensor> after = state_tensors(*optimizer);
    ASSERT_EQ(after.size(), state.size());
    for (std::size_t i = 0; i < state.size(); ++i) EXPECT_TRUE(after[i].equal(state[i])) << "state tensor " << i;
    found.fill_(0);
    run(*optimizer, params, 2, 10);
    if (c.config.name != config::OptimizerName::kSgd) continue;
    auto expected = parameters();
    const auto plain = optimizer_for(c.config, expected);
    run(*plain, expected, 2, 9);
    run(*plain, expected, 2, 10);
    expect_close(params, expected, c.label + " foreach, a skipped step between");
  }
}

TEST(MultiTensorOptimizers, AreLibTorchsOptimizerTypes) {
  auto params = parameters();
  const auto sgd = optimizer_for(with_kernel(make(config::OptimizerName::kSgd, 0.1, 0.9, 0), "fused"), params);
  const auto adam = optimizer_for(with_kernel(make(config::OptimizerName::kAdam, 0.1, 0, 0), "foreach"), params);
  const auto adamw = optimizer_for(with_kernel(make(config::OptimizerName::kAdamW, 0.1, 0, 0), "fused"), params);
  EXPECT_NE(dynamic_cast<torch::optim::SGD*>(sgd.get()), nullptr);
  EXPECT_NE(dynamic_cast<torch::optim::Adam*>(adam.get()), nullptr);
  EXPECT_NE(dynamic_cast<torch::optim::AdamW*>(adamw.get()), nullptr);
}

// A checkpoint written by one implementation resumes in the other.
TEST(MultiTensorOptimizers, StateRoundTripsThroughLibTorchsOptimizer) {
  for (const Case& c : cases()) {
    auto fast_params = parameters();
    const auto fast = optimizer_for(with_kernel(c.config, "fused"), fast_params);
    run(*fast, fast_params, 3, 11);
    std::stringstream saved;
    {
      torch::serialize::OutputArchive archive;
      fast->save(archive);
      archive.save_to(saved);
    }
    std::vector<torch::Tensor> plain_params;
    for (const auto& p : fast_params) plain_params.push_back(p.detach().clone().requires_grad_());
    const auto plain = optimizer_for(c.config, plain_params);
    torch::serialize::InputArchive archive;
    archive.load_from(saved);
    plain->load(archive);
    for (std::size_t g = 0; g < plain->param_groups().size(); ++g) {
      plain->param_groups()[g].options().set_lr(fast->param_groups().at(g).options().get_lr());
    }
    run(*fast, fast_params, 2, 12);
    run(*plain, plain_params, 2, 12);
    expect_close(fast_params, plain_params, c.label);
  }
}

// model.freeze with a CUDA graph: the frozen parameters get no gradient, so
// an optimizer that held them could not replay its step (prepare_step() says
// false, and the graph would fall back to eager steps). param_groups leaves
// them out, and the step over the rest replays and leaves them alone.
TEST(MultiTensorOptimizers, AFrozenModelsStepReplaysAndLeavesTheFrozenParametersAlone) {
  for (const auto name : {config::OptimizerName::kSgd, config::OptimizerName::kAdamW}) {
    for (const std::string kernel : {"foreach", "fused"}) {
      SCOPED_TRACE(std::string(config::word(name)) + " " + kernel);
      torch::manual_seed(1);
      torch::nn::Sequential model(torch::nn::Linear(3, 4), torch::nn::Linear(4, 2));
      for (auto& p : model[0]->parameters()) p.set_requires_grad(false);
      config::OptimConfig c;
      c.name = name;
      c.momentum = 0.9;
      c.foreach = kernel == "foreach";
      c.fused = kernel == "fused" ? config::Switch::kOn : config::Switch::kOff;
      // Two steps (the second has SGD's momentum buffers started); whether the second replays.
      const auto second_step_replays = [&](torch::optim::Optimizer& optimizer) {
        auto& split = dynamic_cast<detail::SplitStep&>(optimizer);
        bool replays = false;
        for (int step = 0; step < 2; ++step) {
          optimizer.zero_grad();
          model->forward(torch::randn({5, 3})).pow(2).sum().backward();
          replays = split.prepare_step();
          split.launch_step();
        }
        return replays;
      };
      std::vector<torch::Tensor> before;
      for (const auto& p : model->parameters()) before.push_back(p.detach().clone());
      EXPECT_TRUE(second_step_replays(*make_optimizer(c, param_groups(c, model->named_parameters()))));
      const auto after = model->parameters();
      for (std::size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(torch::equal(after[i], before[i]), i < 2) << "parameter " << i << (i < 2 ? " (frozen)" : "");
      }
      // Held by the optimizer, the frozen parameters would keep the step from replaying.
      EXPECT_FALSE(second_step_replays(*make_optimizer(c, {ParamGroup{model->parameters(), 0, 1, "all"}})));
    }
  }
}

}  // namespace
}  // namespace gputrain::optim
