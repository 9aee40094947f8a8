// GPU busy from CUDA events around each step: the GPU's time on the steps,
// without the host's gaps between them.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <chrono>
#include <thread>

#include "gputrain/device/busy_timer.h"

namespace gputrain::device {
namespace {

TEST(StepBusyTimer, TimesNothingOffCuda) {
  StepBusyTimer timer{torch::Device(torch::kCPU)};
  timer.step_begin();
  timer.step_end();
  EXPECT_FALSE(timer.take_busy_seconds().has_value()) << "no CUDA events, no figure: never a made-up 0";
}

TEST(StepBusyTimer, CountsTheStepsNotTheHostsGaps_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  StepBusyTimer timer(torch::Device(torch::kCUDA, 0));
  const torch::Tensor a = torch::randn({2048, 2048}, torch::kCUDA);
  torch::Tensor b = a;
  torch::cuda::synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 4; ++step) {
    timer.step_begin();
    for (int i = 0; i < 20; ++i) b = torch::mm(a, b).tanh();
    timer.step_end();
    torch::cuda::synchronize();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the GPU idles: not busy
  }
  const double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::optional<double> busy = timer.take_busy_seconds();
  ASSERT_TRUE(busy.has_value());
  EXPECT_GT(*busy, 0.0);
  EXPECT_LT(*busy, window - 4 * 0.045) << "the host's sleeps between the steps are not GPU time";
  timer.step_begin();
  timer.step_end();
  EXPECT_LT(timer.take_busy_seconds().value(), *busy) << "each take starts over";
}

}  // namespace
}  // namespace gputrain::device
