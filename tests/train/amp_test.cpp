#include "gputrain/train/amp.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <thread>

namespace gputrain::train {
namespace {

// float32 unless autocast is on for the CPU.
torch::ScalarType cpu_mm_dtype() { return torch::mm(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type(); }

TEST(AutocastScope, CpuBf16LowersMatmulAndLinear) {
  torch::manual_seed(0);
  torch::nn::Linear linear(4, 3);
  const torch::Tensor x = torch::randn({2, 4});
  {
    AutocastScope autocast(AmpMode::kBf16, torch::kCPU);
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
    AutocastScope outer(AmpMode::kBf16, torch::kCPU);
    {
      AutocastScope inner(AmpMode::kBf16, torch::kCPU);
      AutocastScope off(AmpMode::kOff, torch::kCPU);  // leaves the state alone
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
    AutocastScope autocast(AmpMode::kBf16, torch::kCPU);
    EXPECT_EQ(autocast_state(torch::kCPU).dtype, torch::kBFloat16);
  }
  EXPECT_EQ(autocast_state(torch::kCPU).dtype, torch::kHalf);
  at::autocast::set_autocast_dtype(torch::kCPU, original);
}

TEST(AutocastScope, StateIsThreadLocal) {
  AutocastScope autocast(AmpMode::kBf16, torch::kCPU);
  torch::ScalarType in_thread = torch::kBFloat16;
  std::thread([&] { in_thread = cpu_mm_dtype(); }).join();
  EXPECT_EQ(in_thread, torch::kFloat);  // why each replica thread opens its own scope
  EXPECT_EQ(cpu_mm_dtype(), torch::kBFloat16);
}

TEST(AutocastScope, Fp16OnCpuIsAConfigError) {
  EXPECT_THROW(AutocastScope(AmpMode::kFp16, torch::kCPU) /*a temporary*/, ConfigError);
  EXPECT_FALSE(autocast_state(torch::kCPU).enabled);
}

TEST(CheckAmpDevice, Fp16NeedsCuda) {
  try {
    check_amp_device(AmpMode::kFp16, torch::kCPU, SourceMark{"exp.yaml", 7, 8});
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "train.amp");
    EXPECT_STREQ(e.what(), "exp.yaml:7:8: train.amp: fp16 autocast needs CUDA; on CPU use bf16 (train.amp: bf16)");
  }
  EXPECT_NO_THROW(check_amp_device(AmpMode::kFp16, torch::kCUDA));
  EXPECT_NO_THROW(check_amp_device(AmpMode::kBf16, torch::kCPU));
  EXPECT_NO_THROW(check_amp_device(AmpMode::kBf16, torch::kCUDA));
  EXPECT_NO_THROW(check_amp_device(AmpMode::kOff, torch::kMPS));
  EXPECT_THROW(check_amp_device(AmpMode::kBf16, torch::kMPS), ConfigError);
}

TEST(AmpMode, ParsesTheConfigWords) {
  for (const AmpMode mode : {AmpMode::kOff, AmpMode::kFp16, AmpMode::kBf16}) {
    EXPECT_EQ(parse_amp_mode(to_string(mode)), mode);
  }
  EXPECT_EQ(parse_amp_mode("bf16"), AmpMode::kBf16);
  EXPECT_THROW(parse_amp_mode("fp8"), InternalError);
}

}  // namespace
}  // namespace gputrain::train
