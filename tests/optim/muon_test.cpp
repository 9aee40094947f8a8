// optim.muon: the Newton–Schulz iteration orthogonalises, and two steps of the
// optimizer (Muon for the convolution weight, SGD, Adam or AdamW for the rest)
// are those written out by hand below or LibTorch's.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/linalg_svd.h>
#include <ATen/ops/linalg_svdvals.h>
#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gputrain/optim/muon.h"
#include "gputrain/optim/optimizer.h"

namespace gputrain::optim {
namespace {

// The singular values of newton_schulz(g) lie in the quintic's band, and its
// singular vectors are g's: Uᵀ X V is diagonal for g = U S Vᵀ.
void expect_orthogonalised(const torch::Tensor& g, int64_t steps) {
  const torch::Tensor x = newton_schulz(g, steps);
  ASSERT_EQ(x.sizes(), g.sizes());
  const torch::Tensor s = at::linalg_svdvals(x);
  EXPECT_GT(s.min().item<double>(), 0.68) << s;
  EXPECT_LT(s.max().item<double>(), 1.22) << s;
  const auto [u, sigma, vh] = at::linalg_svd(g, /*full_matrices=*/false, /*driver=*/std::nullopt);
  const torch::Tensor inner = u.t().mm(x).mm(vh.t());
  const torch::Tensor off_diagonal = inner - torch::diag(torch::diagonal(inner));
  EXPECT_LT(off_diagonal.abs().max().item<double>(), 1e-4);
}

TEST(NewtonSchulz, SingularValuesNearOneForWideAndTallMatrices) {
  auto gen = at::detail::createCPUGenerator(3);
  expect_orthogonalised(torch::randn({16, 40}, gen), 5);
  expect_orthogonalised(torch::randn({40, 16}, gen), 5);
  // airbench's 3 steps on a convolution's shape ([out, in × 3 × 3]) already reach the band.
  expect_orthogonalised(torch::randn({24, 72}, gen), 3);
}

// The hand computation's Newton–Schulz, in float64: X ← a X + b (X Xᵀ) X + c (X Xᵀ)² X on the wide matrix.
torch::Tensor by_hand(torch::Tensor g, int64_t steps) {
  torch::Tensor x = g.to(torch::kFloat64) / (g.to(torch::kFloat64).norm() + 1e-7);
  for (int64_t i = 0; i < steps; ++i) {
    const torch::Tensor a = x.mm(x.t());
    x = 3.4445 * x - 4.7750 * a.mm(x) + 2.0315 * a.mm(a).mm(x);
  }
  return x;
}

TEST(Muon, TwoStepsAreTheHandComputation) {
  auto gen = at::detail::createCPUGenerator(7);
  const torch::Tensor w0 = torch::randn({3, 2, 2, 2}, gen);
  const torch::Tensor b0 = torch::randn({3}, gen);
  const std::vector<torch::Tensor> weight_grads{torch::randn({3, 2, 2, 2}, gen), torch::randn({3, 2, 2, 2}, gen)};
  const std::vector<torch::Tensor> bias_grads{torch::randn({3}, gen), torch::randn({3}, gen)};

  config::OptimConfig c;
  c.lr = 0.1;
  c.momentum = 0.5;
  c.nesterov = true;
  c.muon.lr = 0.2;
  c.muon.momentum = 0.6;
  c.muon.nesterov = true;
  c.muon.steps = 3;
  torch::Tensor w = w0.clone().requires_grad_();
  torch::Tensor b = b0.clone().requires_grad_();
  torch::OrderedDict<std::string, torch::Tensor> named;
  named.insert("conv.weight", w);
  named.insert("conv.bias", b);
  const std::vector<ParamGroup> groups = param_groups(c, named);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(describe(groups),
            "2 parameter groups: 1 tensor without weight decay, lr × 1; 1 convolution weight by Muon without weight "
            "decay, lr × 2");
  auto optimizer = make_optimizer(c, groups);
  for (std::size_t s = 0; s < 2; ++s) {
    w.mutable_grad() = weight_grads[s].clone();
    b.mutable_grad() = bias_grads[s].clone();
    optimizer->step();
  }

  // Muon: the buffer starts at 0; nesterov's update; the weight rescaled to norm sqrt(3), then moved.
  torch::Tensor weight = w0.to(torch::kFloat64), buffer = torch::zeros_like(weight);
  torch::Tensor bias = b0.to(torch::kFloat64), bias_buffer = torch::zeros_like(bias);
  for (std::size_t s = 0; s < 2; ++s) {
    const torch::Tensor g = weight_grads[s].to(torch::kFloat64);
    buffer = 0.6 * buffer + g;
    const torch::Tensor update = g + 0.6 * buffer;
    weight = weight * std::sqrt(3.0) / weight.norm();
    weight = weight - 0.2 * by_hand(update.reshape({3, 8}), 3).reshape({3, 2, 2, 2});
    // SGD with Nesterov momentum (PyTorch's: the first buffer is the gradient).
    const torch::Tensor gb = bias_grads[s].to(torch::kFloat64);
    bias_buffer = s == 0 ? gb : 0.5 * bias_buffer + gb;
    bias = bias - 0.1 * (gb + 0.5 * bias_buffer);
  }
  EXPECT_TRUE(torch::allclose(w.detach().to(torch::kFloat64), weight, 1e-5, 1e-5)) << w << weight;
  EXPECT_TRUE(torch::allclose(b.detach().to(torch::kFloat64), bias, 1e-6, 1e-6)) << b << bias;
}

// The reference for the parameters beside Muon's: LibTorch's own Adam or AdamW
// with the groups param_groups made (a decayed weight, an undecayed bias).
template <typename Optimizer, typename Options>
std::unique_ptr<torch::optim::Optimizer> torch_adam(const torch::Tensor& weight, const torch::Tensor& bias) {
  const auto options = Options(0.01).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.1);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{weight}, std::make_unique<Options>(options));
  groups.emplace_back(std::vector<torch::Tensor>{bias}, std::make_unique<Options>(Options(options).weight_decay(0)));
  return std::make_unique<Optimizer>(std::move(groups), options);
}

// optim.muon beside adam and adamw, with the fused and the foreach step: two
// steps move the linear layer's weight and bias as LibTorch's Adam/AdamW moves
// them (betas, eps, L2 or decoupled decay, bias correction, no decay on the
// bias) and the convolution weight as Muon's hand computation does; a step
// train.on_nan skips then moves none of them.
TEST(Muon, BesideAdamAndAdamWMatchesLibTorchsAdamAndTheHandComputation) {
  for (const config::OptimizerName name : {config::OptimizerName::kAdam, config::OptimizerName::kAdamW}) {
    for (const bool foreach : {false, true}) {
      SCOPED_TRACE(::testing::Message() << config::word(name) << (foreach ? " foreach" : " fused"));
      auto gen = at::detail::createCPUGenerator(5);
      const torch::Tensor c0 = torch::randn({3, 2, 2, 2}, gen), w0 = torch::randn({4, 3}, gen);
      const torch::Tensor b0 = torch::randn({4}, gen);
      std::vector<std::vector<torch::Tensor>> grads;  // per step: conv, weight, bias
      for (int s = 0; s < 2; ++s) {
        grads.push_back({torch::randn({3, 2, 2, 2}, gen), torch::randn({4, 3}, gen), torch::randn({4}, gen)});
      }

      config::OptimConfig c;
      c.name = name;
      c.lr = 0.01;
      c.betas = {0.8, 0.95};
      c.eps = 1e-6;
      c.weight_decay = 0.1;
      c.no_decay_bias_norm = true;
      c.foreach = foreach;
      c.muon.lr = 0.2;
      c.muon.momentum = 0.6;
      c.muon.nesterov = true;
      c.muon.steps = 3;
      const std::vector<torch::Tensor> ours{c0.clone().requires_grad_(), w0.clone().requires_grad_(),
                                            b0.clone().requires_grad_()};
      torch::OrderedDict<std::string, torch::Tensor> named;
      named.insert("conv.weight", ours[0]);
      named.insert("fc.weight", ours[1]);
      named.insert("fc.bias", ours[2]);
      const std::vector<ParamGroup> groups = param_groups(c, named);
      ASSERT_EQ(groups.size(), 3u);
      ASSERT_TRUE(groups.back().muon);
      auto optimizer = make_optimizer(c, groups);

      const torch::Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      auto reference = name == config::OptimizerName::kAdam
                           ? torch_adam<torch::optim::Adam, torch::optim::AdamOptions>(w, b)
                           : torch_adam<torch::optim::AdamW, torch::optim::AdamWOptions>(w, b);
      torch::Tensor conv = c0.to(torch::kFloat64), buffer = torch::zeros_like(conv);
      for (std::size_t s = 0; s < 2; ++s) {
        for (std::size_t i = 0; i < 3; ++i) ours[i].mutable_grad() = grads[s][i].clone();
        optimizer->step();
        w.mutable_grad() = grads[s][1].clone();
        b.mutable_grad() = grads[s][2].clone();
        reference->step();
        const torch::Tensor g = grads[s][0].to(torch::kFloat64);
        buffer = 0.6 * buffer + g;
        conv = conv * std::sqrt(3.0) / conv.norm();
        conv = conv - 0.2 * by_hand((g + 0.6 * buffer).reshape({3, 8}), 3).reshape({3, 2, 2, 2});
      }
      EXPECT_TRUE(torch::allclose(ours[0].detach().to(torch::kFloat64), conv, 1e-5, 1e-5)) << ours[0] << conv;
      EXPECT_TRUE(torch::allclose(ours[1].detach(), w.detach(), 1e-6, 1e-6)) << ours[1] << w;
      EXPECT_TRUE(torch::allclose(ours[2].detach(), b.detach(), 1e-6, 1e-6)) << ours[2] << b;
      // train.on_nan's skip: a step with NaN gradients and found set moves nothing, Muon's weight included.
      ASSERT_TRUE(skip_updates_when(*optimizer, torch::ones({})));
      for (const torch::Tensor& p : ours) p.mutable_grad() = torch::full_like(p, std::nan(""));
      const std::vector<torch::Tensor> before{ours[0].detach().clone(), ours[1].detach().clone(),
                                              ours[2].detach().clone()};
      optimizer->step();
      for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(ours[i].detach(), before[i])) << i;
    }
  }
}

TEST(Muon, OffLeavesConvolutionWeightsInTheirGroups) {
  config::OptimConfig c;
  torch::OrderedDict<std::string, torch::Tensor> named;
  named.insert("conv.weight", torch::zeros({3, 2, 2, 2}).requires_grad_());
  const std::vector<ParamGroup> groups = param_groups(c, named);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_FALSE(groups.front().muon);
}

}  // namespace
}  // namespace gputrain::optim
