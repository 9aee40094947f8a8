// AMP on a GPU. Without CUDA every case reports "skipped", never "passed".
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>


#include "gputrain/train/amp.h"

namespace gputrain::train {
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
    AutocastScope autocast(AmpMode::kFp16, torch::kCUDA);
    EXPECT_EQ(cuda_mm_dtype(), torch::kHalf);
    {
      AutocastScope inner(AmpMode::kBf16, torch::kCUDA);
      EXPECT_EQ(cuda_mm_dtype(), torch::kBFloat16);
    }
    EXPECT_EQ(cuda_mm_dtype(), torch::kHalf);  // the inner scope gave the dtype back
  }
  EXPECT_FALSE(autocast_state(torch::kCUDA).enabled);
  EXPECT_EQ(autocast_state(torch::kCUDA).dtype, original);
  EXPECT_EQ(cuda_mm_dtype(), torch::kFloat);
}

}  // namespace
}  // namespace gputrain::train
