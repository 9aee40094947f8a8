#include "gputrain/train/efficiency.h"

#include <gtest/gtest.h>

namespace gputrain::train {
namespace {

using device::MathPrecision;

TEST(Efficiency, TflopsAreThreeForwardPassesOfWorkAndTheShareCountsEveryDevice) {
  Efficiency e;
  e.train_flops_per_sample = 6.0 * 17'754'752;  // configs/fashion_mnist_fast.yaml's network
  EXPECT_NEAR(e.tflops(124'143), 13.22, 0.01);
  EXPECT_FALSE(e.peak_share(124'143)) << "no peak known";
  e.peak = device::PeakRate{494.7, "the H200's dense TF32 peak (data sheet)"};
  EXPECT_NEAR(*e.peak_share(124'143), 13.22 / 494.7, 1e-4);
  e.devices = 2;  // two ranks' samples/s against two devices' peak
  EXPECT_NEAR(*e.peak_share(2 * 124'143), 13.22 / 494.7, 1e-4);
  EXPECT_EQ(e.describe(),
            "a training sample is 106.5 M FLOPs (3 x the traced forward pass); epochs report TFLOP/s as a share of "
            "494.7 TFLOP/s on each of 2 devices: the H200's dense TF32 peak (data sheet)");
  e.peak.reset();
  EXPECT_EQ(e.describe(),
            "a training sample is 106.5 M FLOPs (3 x the traced forward pass); no peak is known for this device, so "
            "epochs report TFLOP/s without a share");
}

TEST(Efficiency, ThePrecisionIsTheAutocastsElseTheFloat32MatmulPrecisions) {
  const torch::Device gpu(torch::kCUDA, 0);
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(math_precision(config::AmpMode::kBf16, "high", gpu), MathPrecision::kBf16);
  EXPECT_EQ(math_precision(config::AmpMode::kFp16, "highest", gpu), MathPrecision::kFp16);
  EXPECT_EQ(math_precision(config::AmpMode::kOff, "high", gpu), MathPrecision::kTf32);
  EXPECT_EQ(math_precision(config::AmpMode::kOff, "highest", gpu), MathPrecision::kFp32);
  EXPECT_EQ(math_precision(config::AmpMode::kOff, "medium", gpu), MathPrecision::kBf16);
  EXPECT_EQ(math_precision(config::AmpMode::kOff, "high", cpu), MathPrecision::kFp32);
}

TEST(Efficiency, TheCpuRunsShareIsOfItsMeasuredPeak) {
  const Efficiency e = run_efficiency(176, torch::Device(torch::kCPU), MathPrecision::kFp32, 1);
  EXPECT_DOUBLE_EQ(e.train_flops_per_sample, 1056);
  ASSERT_TRUE(e.peak);
  EXPECT_GT(e.peak->tflops, 0);
}

}  // namespace
}  // namespace gputrain::train
