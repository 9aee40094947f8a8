#include "gputrain/step/amp.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/step/optimizer_step.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <limits>
#include <thread>

namespace gputrain::step {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One parameter w = [1, 2] trained by SGD(lr 0.5) on loss = w . [3, 4], so
// the true gradient is [3, 4] and a scaled one is [3, 4] * scale.
class ScalerStep : public ::testing::Test {
 protected:
  torch::Tensor w_ = torch::tensor({1.0f, 2.0f}).requires_grad_();
  torch::Tensor x_ = torch::tensor({3.0f, 4.0f});
  torch::optim::SGD sgd_{std::vector<torch::Tensor>{w_}, torch::optim::SGDOptions(0.5)};

  torch::Tensor loss() const { return (w_ * x_).sum(); }

  // One optimizer step through `scaler`, with an inf in the gradient when asked.
  bool train_step(GradScaler& scaler, bool inject_inf = false) {
    sgd_.zero_grad();
    scaler.scale(loss()).backward();
    if (inject_inf) w_.grad()[0] = kInf;
    const bool stepped = scaler.step(sgd_);
    scaler.update();
    return stepped;
  }
};

TEST_F(ScalerStep, SkipsStepWithInfGradientAndBacksOff) {
  GradScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0);
  const torch::Tensor before = w_.detach().clone();

  EXPECT_FALSE(train_step(scaler, /*inject_inf=*/true));
  EXPECT_TRUE(torch::equal(w_.detach(), before));
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  EXPECT_TRUE(train_step(scaler));
  EXPECT_TRUE(torch::allclose(w_.detach(), before - 0.5 * x_));  // the unscaled gradient was applied
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST_F(ScalerStep, NanGradientAlsoSkips) {
  GradScaler scaler;
  sgd_.zero_grad();
  scaler.scale(loss()).backward();
  w_.grad()[1] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(scaler.step(sgd_));
  scaler.update();
  EXPECT_EQ(scaler.scale(), 32768.0);
}

TEST_F(ScalerStep, GrowsAfterGrowthInterval) {
  GradScaler scaler(GradScalerOptions().init_scale(8.0).growth_interval(3));
  EXPECT_TRUE(train_step(scaler));
  EXPECT_TRUE(train_step(scaler));
  EXPECT_EQ(scaler.scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  EXPECT_TRUE(train_step(scaler));
  EXPECT_EQ(scaler.scale(), 16.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  // An inf resets the run of clean steps as well as halving the scale.
  EXPECT_TRUE(train_step(scaler));
  EXPECT_FALSE(train_step(scaler, /*inject_inf=*/true));
  EXPECT_EQ(scaler.scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST_F(ScalerStep, UnscaleDividesGradientsExactlyThenClipBoundsTheNorm) {
  GradScaler scaler(GradScalerOptions().init_scale(1024.0));
  sgd_.zero_grad();
  scaler.scale(loss()).backward();
  EXPECT_TRUE(torch::equal(w_.grad(), x_ * 1024));
  scaler.unscale_(sgd_);
  EXPECT_TRUE(torch::equal(w_.grad(), x_));

  const double norm = clip_grad_norm({w_}, 0.5).item<double>();
  EXPECT_DOUBLE_EQ(norm, 5.0);  // |[3, 4]| before clipping
  EXPECT_LE(w_.grad().norm().item<double>(), 0.5 + 1e-6);

  EXPECT_TRUE(scaler.step(sgd_));  // no second unscale: the clipped gradient is applied
  EXPECT_TRUE(torch::allclose(w_.detach(), torch::tensor({1.0f, 2.0f}) - 0.5 * x_ / 10));
  scaler.update();
}

TEST(GradScaler, UnscalesEveryDtypeGroupAndSparseGradients) {
  torch::manual_seed(0);
  torch::Tensor f32 = torch::ones({3}).requires_grad_();
  torch::Tensor f64 = torch::ones({2}, torch::kDouble).requires_grad_();
  torch::Tensor none = torch::ones({1}).requires_grad_();  // no gradient: left alone
  torch::nn::Embedding embedding(torch::nn::EmbeddingOptions(5, 2).sparse(true));
  GradScaler scaler(GradScalerOptions().init_scale(4.0));

  const torch::Tensor loss =
      (f32 * 2).sum() + (f64 * 3).sum().to(torch::kFloat) + embedding(torch::tensor({1, 3}, torch::kLong)).sum();
  scaler.scale(loss).backward();
  ASSERT_TRUE(embedding->weight.grad().is_sparse());
  std::vector<torch::Tensor> parameters{f32, f64, none, embedding->weight};
  scaler.unscale_(parameters);

  EXPECT_TRUE(torch::equal(f32.grad(), torch::full({3}, 2.0f)));
  EXPECT_TRUE(torch::equal(f64.grad(), torch::full({2}, 3.0, torch::kDouble)));
  EXPECT_FALSE(none.grad().defined());
  const torch::Tensor dense = embedding->weight.grad().to_dense();
  EXPECT_TRUE(torch::equal(dense.sum(1), torch::tensor({0.0f, 2.0f, 0.0f, 2.0f, 0.0f})));
}

TEST_F(ScalerStep, StateRoundTrips) {
  GradScaler scaler(GradScalerOptions().growth_interval(5));
  train_step(scaler, /*inject_inf=*/true);
  train_step(scaler);
  train_step(scaler);
  const GradScalerState state = scaler.state_dict();
  EXPECT_EQ(state.at("scale"), 32768.0);
  EXPECT_EQ(state.at("growth_tracker"), 2.0);
  EXPECT_EQ(state.at("skipped_steps"), 1.0);
  EXPECT_EQ(state.at("growth_interval"), 5.0);

  GradScaler fresh;  // before its first scale(): the state seeds the lazy tensors
  fresh.load_state_dict(state);
  EXPECT_EQ(fresh.state_dict(), state);
  EXPECT_EQ(fresh.scale(), 32768.0);
  EXPECT_EQ(fresh.growth_tracker(), 2);
  EXPECT_EQ(fresh.skipped_steps(), 1);

  GradScaler used;  // after it: the live tensors are overwritten
  train_step(used);
  used.load_state_dict(state);
  EXPECT_EQ(used.state_dict(), state);
  // The loaded growth_interval (5) applies: three more clean steps reach it.
  for (int i = 0; i < 3; ++i) train_step(used);
  EXPECT_EQ(used.scale(), 65536.0);
  EXPECT_EQ(used.growth_tracker(), 0);
}

TEST(GradScaler, RejectsBadState) {
  GradScaler scaler;
  const GradScalerState good = GradScaler().state_dict();
  EXPECT_THROW(scaler.load_state_dict({}), CheckpointError);  // saved while disabled
  GradScalerState missing = good;
  missing.erase("growth_tracker");
  EXPECT_THROW(scaler.load_state_dict(missing), CheckpointError);
  GradScalerState unknown = good;
  unknown["loss_scale"] = 1.0;
  EXPECT_THROW(scaler.load_state_dict(unknown), CheckpointError);
  GradScalerState bad = good;
  bad["scale"] = -1.0;
  EXPECT_THROW(scaler.load_state_dict(bad), CheckpointError);
  bad = good;
  bad["skipped_steps"] = 1.5;
  EXPECT_THROW(scaler.load_state_dict(bad), CheckpointError);
  EXPECT_EQ(scaler.state_dict(), good);  // nothing half-loaded
}

TEST(GradScaler, RejectsBadOptionsAndMisuse) {
  EXPECT_THROW(GradScaler{GradScalerOptions().growth_factor(1.0)}, InternalError);
  EXPECT_THROW(GradScaler{GradScalerOptions().backoff_factor(1.0)}, InternalError);
  EXPECT_THROW(GradScaler{GradScalerOptions().growth_interval(0)}, InternalError);

  torch::Tensor w = torch::ones({2}).requires_grad_();
  GradScaler scaler;
  EXPECT_THROW(scaler.unscale_({w}), InternalError);  // nothing scaled yet
  scaler.scale(w.sum()).backward();
  EXPECT_THROW(scaler.update(), InternalError);  // no inf check yet
  scaler.unscale_({w});
  EXPECT_THROW(scaler.unscale_({w}), InternalError);  // twice between updates

  torch::Tensor half = torch::ones({2}, torch::kHalf).requires_grad_();
  GradScaler fp16_grads;
  fp16_grads.scale(half.sum().to(torch::kFloat)).backward();
  EXPECT_THROW(fp16_grads.unscale_({half}), InternalError);
}

TEST_F(ScalerStep, DisabledScalerPassesThrough) {
  GradScaler scaler(GradScalerOptions().enabled(false));
  EXPECT_FALSE(scaler.enabled());
  const torch::Tensor l = loss();
  EXPECT_TRUE(scaler.scale(l).is_same(l));
  EXPECT_EQ(scaler.scale(), 1.0);

  sgd_.zero_grad();
  scaler.scale(loss()).backward();
  scaler.unscale_(sgd_);
  EXPECT_TRUE(torch::equal(w_.grad(), x_));  // not divided by anything

  const torch::Tensor before = w_.detach().clone();
  EXPECT_TRUE(train_step(scaler));
  EXPECT_TRUE(torch::allclose(w_.detach(), before - 0.5 * x_));
  EXPECT_TRUE(train_step(scaler, /*inject_inf=*/true));  // steps even so
  EXPECT_EQ(scaler.skipped_steps(), 0);
  EXPECT_TRUE(scaler.state_dict().empty());
  scaler.load_state_dict(GradScaler().state_dict());  // ignored
  EXPECT_EQ(scaler.scale(), 1.0);
}

// float32 unless autocast is on for the CPU.
torch::ScalarType cpu_mm_dtype() { return torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type(); }

TEST(AutocastScope, CpuBf16LowersMatmulAndLinear) {
  torch::manual_seed(0);
  torch::nn::Linear linear(4, 3);
  const torch::Tensor x = torch::randn({2, 4});
  {
    AutocastScope autocast(config::AmpMode::kBf16, torch::kCPU);
    EXPECT_TRUE(autocast_state(torch::kCPU).enabled);
    EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
    EXPECT_EQ(linear(x).scalar_type(), torch::kBFloat16);
  }
  EXPECT_FALSE(autocast_state(torch::kCPU).enabled);
  EXPECT_EQ(cpu_mm_dtype(), torch::kFloat);
  EXPECT_EQ(linear(x).scalar_type(), torch::kFloat);
}

TEST(AutocastScope, NestedScopesRestoreTheOuterState) {
  {
    AutocastScope outer(config::AmpMode::kBf16, torch::kCPU);
    {
      AutocastScope inner(config::AmpMode::kBf16, torch::kCPU);
      AutocastScope off(config::AmpMode::kOff, torch::kCPU);  // leaves the state alone
      EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
    }
    EXPECT_TRUE(autocast_state(torch::kCPU).enabled);
    EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
  }
  EXPECT_FALSE(autocast_state(torch::kCPU).enabled);
  EXPECT_EQ(cpu_mm_dtype(), torch::kFloat);
}

TEST(AutocastScope, RestoresThePreviousDtype) {
  // The CPU's default autocast dtype is already bfloat16, so start from
  // another one (set through LibTorch directly) to see it come back.
  const c10::ScalarType original = autocast_state(torch::kCPU).dtype;
  at::autocast::set_autocast_dtype(torch::kCPU, torch::kHalf);
  {
    AutocastScope autocast(config::AmpMode::kBf16, torch::kCPU);
    EXPECT_EQ(autocast_state(torch::kCPU).dtype, torch::kBFloat16);
  }
  EXPECT_EQ(autocast_state(torch::kCPU).dtype, torch::kHalf);
  at::autocast::set_autocast_dtype(torch::kCPU, original);
}

TEST(AutocastScope, StateIsThreadLocal) {
  AutocastScope autocast(config::AmpMode::kBf16, torch::kCPU);
  torch::ScalarType in_thread = torch::kBFloat16;
  std::thread([&] { in_thread = cpu_mm_dtype(); }).join();
  EXPECT_EQ(in_thread, torch::kFloat);  // why each replica thread opens its own scope
  EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
}

// A CUDA graph's warm-up and capture run without autocast's weight cache:
// a cached cast made outside the capture would be replayed stale.
TEST(AutocastScope, TurnsTheCastCacheOffWhenAskedAndRestoresIt) {
  ASSERT_TRUE(at::autocast::is_autocast_cache_enabled());
  {
    AutocastScope uncached(config::AmpMode::kBf16, torch::kCPU, /*cache_casts=*/false);
    EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
    EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
  }
  EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  {
    AutocastScope cached(config::AmpMode::kBf16, torch::kCPU);
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  }
  {
    AutocastScope off(config::AmpMode::kOff, torch::kCPU, /*cache_casts=*/false);  // leaves everything alone
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  }
}

// The captured fp16 step: the scaler unscales and checks on the device and the
// fused update skips on its flag, with no host read. Four steps, inf gradients
// in the first and third: the weights, scale, growth tracker and skipped count
// end as scaler.step() with LibTorch's SGD leaves them.
TEST(GradScaler, TheFusedStepSkipsOnTheDeviceFlagAsStepDoes) {
  const torch::Tensor x = torch::tensor({3.0f, 4.0f});
  torch::Tensor w_host = torch::tensor({1.0f, 2.0f}).requires_grad_();
  torch::Tensor w_device = w_host.detach().clone().requires_grad_();
  torch::optim::SGD sgd(std::vector<torch::Tensor>{w_host}, torch::optim::SGDOptions(0.5).momentum(0.9));
  config::OptimConfig fused_config;
  fused_config.lr = 0.5;
  fused_config.momentum = 0.9;
  fused_config.fused = config::Switch::kOn;
  const auto fused = optim::make_optimizer(fused_config, {optim::ParamGroup{{w_device}}});
  GradScaler host_scaler(GradScalerOptions().growth_interval(2));
  GradScaler device_scaler(GradScalerOptions().growth_interval(2));
  for (int step = 0; step < 4; ++step) {
    const bool inf = step == 0 || step == 2;
    sgd.zero_grad();
    host_scaler.scale((w_host * x).sum()).backward();
    if (inf) w_host.grad()[1] = kInf;
    EXPECT_EQ(host_scaler.step(sgd), !inf) << step;
    host_scaler.update();

    fused->zero_grad();
    device_scaler.scale((w_device * x).sum()).backward();
    if (inf) w_device.grad()[1] = kInf;
    const torch::Tensor found = device_scaler.unscale_for_fused_step({w_device});
    EXPECT_EQ(found.item<float>(), inf ? 1.0f : 0.0f) << step;
    ASSERT_TRUE(optim::skip_updates_when(*fused, found));
    fused->step();
    device_scaler.update();

    EXPECT_TRUE(torch::allclose(w_device.detach(), w_host.detach(), 1e-6, 1e-6))
        << "step " << step << ": " << w_device << " vs " << w_host;
    EXPECT_EQ(device_scaler.scale(), host_scaler.scale()) << step;
    EXPECT_EQ(device_scaler.growth_tracker(), host_scaler.growth_tracker()) << step;
    EXPECT_EQ(device_scaler.skipped_steps(), host_scaler.skipped_steps()) << step;
  }
  EXPECT_EQ(device_scaler.skipped_steps(), 2);
  EXPECT_EQ(device_scaler.state_dict(), host_scaler.state_dict());
  // A checkpoint's count replaces the device's, which a captured step keeps adding to.
  device_scaler.load_state_dict(host_scaler.state_dict());
  EXPECT_EQ(device_scaler.skipped_steps(), 2);
}

TEST(AutocastScope, Fp16OnCpuIsAConfigError) {
  EXPECT_THROW(AutocastScope(config::AmpMode::kFp16, torch::kCPU) /*a temporary*/, ConfigError);
  EXPECT_FALSE(autocast_state(torch::kCPU).enabled);
}

TEST(CheckAmpDevice, Fp16NeedsCuda) {
  try {
    check_amp_device(config::AmpMode::kFp16, torch::kCPU, SourceMark{"exp.yaml", 7, 8});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.amp");
    EXPECT_STREQ(e.what(), "exp.yaml:7:8: train.amp: fp16 autocast needs CUDA; on CPU use bf16 (train.amp: bf16)");
  }
  EXPECT_NO_THROW(check_amp_device(config::AmpMode::kFp16, torch::kCUDA));
  EXPECT_NO_THROW(check_amp_device(config::AmpMode::kBf16, torch::kCPU));
  EXPECT_NO_THROW(check_amp_device(config::AmpMode::kBf16, torch::kCUDA));
  EXPECT_NO_THROW(check_amp_device(config::AmpMode::kOff, torch::kMPS));
  EXPECT_THROW(check_amp_device(config::AmpMode::kBf16, torch::kMPS), ConfigError);
}

}  // namespace
}  // namespace gputrain::step
