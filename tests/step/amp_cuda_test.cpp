// AMP on a GPU. Without CUDA every case reports "skipped", never "passed".
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <limits>

#include "gputrain/step/amp.h"

namespace gputrain::step {
namespace {

class AmpCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  }
};

torch::ScalarType cuda_mm_dtype() {
  const torch::Tensor a = torch::ones({8, 8}, torch::kCUDA);
  return torch::mm(a, a).scalar_type();
}

TEST_F(AmpCuda, Fp16AndBf16LowerMatmul_CUDA) {
  const c10::ScalarType original = autocast_state(torch::kCUDA).dtype;
  {
    AutocastScope autocast(config::AmpMode::kFp16, torch::kCUDA);
    EXPECT_EQ(cuda_mm_dtype(), torch::kHalf);
    {
      AutocastScope inner(config::AmpMode::kBf16, torch::kCUDA);
      EXPECT_EQ(cuda_mm_dtype(), torch::kBFloat16);
    }
    EXPECT_EQ(cuda_mm_dtype(), torch::kHalf);  // the inner scope gave the dtype back
  }
  EXPECT_FALSE(autocast_state(torch::kCUDA).enabled);
  EXPECT_EQ(autocast_state(torch::kCUDA).dtype, original);
  EXPECT_EQ(cuda_mm_dtype(), torch::kFloat);
}

TEST_F(AmpCuda, ScalerSkipsInfAndStepsCleanOnTheGpu_CUDA) {
  torch::Tensor w = torch::tensor({1.0f, 2.0f}, torch::kCUDA).requires_grad_();
  const torch::Tensor x = torch::tensor({3.0f, 4.0f}, torch::kCUDA);
  torch::optim::SGD sgd(std::vector<torch::Tensor>{w}, torch::optim::SGDOptions(0.5));
  GradScaler scaler(GradScalerOptions().init_scale(1024.0));

  torch::Tensor loss;
  {
    AutocastScope autocast(config::AmpMode::kFp16, torch::kCUDA);
    loss = (w * x).sum();
  }
  scaler.scale(loss).backward();
  w.grad()[0] = std::numeric_limits<float>::infinity();
  const torch::Tensor before = w.detach().clone();
  EXPECT_FALSE(scaler.step(sgd));
  scaler.update();
  EXPECT_TRUE(torch::equal(w.detach(), before));
  EXPECT_EQ(scaler.scale(), 512.0);

  sgd.zero_grad();
  scaler.scale((w * x).sum()).backward();
  scaler.unscale_(sgd);
  EXPECT_TRUE(torch::equal(w.grad(), x));
  EXPECT_TRUE(scaler.step(sgd));
  scaler.update();
  EXPECT_TRUE(torch::allclose(w.detach(), before - 0.5 * x));
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
}

}  // namespace
}  // namespace gputrain::step
