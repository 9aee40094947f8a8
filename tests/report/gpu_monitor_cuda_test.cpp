// The GPU monitor on a real GPU through the driver's NVML. Without CUDA every
// case reports "skipped", never "passed".
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <chrono>

#include "gputrain/device/probe.h"
#include "gputrain/report/gpu_monitor.h"

namespace gputrain::report {
namespace {

TEST(GpuMonitorCuda, SamplesTheGpuAMatmulKeepsBusy_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device";
  const device::DeviceInventory inventory = device::probe_devices(std::nullopt);
  const auto gpus = monitored_gpus(inventory, {torch::Device(torch::kCUDA, 0)});
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_FALSE(gpus[0].pci_bus_id.empty()) << "the probe records each GPU's PCI bus id for NVML";
  GpuMonitor monitor(gpus, std::chrono::milliseconds(20));
  ASSERT_TRUE(monitor.available()) << monitor.unavailable_reason();
  const torch::Tensor a = torch::randn({4096, 4096}, torch::kCUDA);
  const auto start = std::chrono::steady_clock::now();
  torch::Tensor b = a;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(600)) {
    b = torch::mm(a, b).tanh();
    torch::cuda::synchronize();
  }
  const auto window = monitor.take_window();
  ASSERT_EQ(window.size(), 1u);
  EXPECT_GE(window[0].samples, 5);
  EXPECT_GT(window[0].util_max, 0.0);
  EXPECT_GT(window[0].memory_used_max, 4096 * 4096 * 4) << "at least the operand is resident";
  EXPECT_TRUE(window[0].temperature_max_c.has_value());
}

}  // namespace
}  // namespace gputrain::report
