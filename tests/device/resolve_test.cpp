#include <gtest/gtest.h>

#include "gputrain/device/resolve.h"

namespace gputrain::device {
namespace {

// A machine with `count` GPUs behind an optional CUDA_VISIBLE_DEVICES mask:
// the injected stand-in for the real probe.
DeviceInventory machine(int count, std::optional<std::string> visible = std::nullopt) {
  DeviceInventory inventory;
  inventory.torch_built_with_cuda = true;
  inventory.cuda_visible_devices = visible;
  const auto physical = visible_physical_ids(visible, count);
  for (int i = 0; i < count; ++i) {
    GpuInfo gpu;
    gpu.logical_index = i;
    gpu.physical_id = physical.at(i);
    gpu.name = "Test GPU";
    inventory.gpus.push_back(gpu);
  }
  inventory.cuda_available = count > 0;
  if (count == 0) inventory.cuda_unavailable_reason = "no NVIDIA driver was found on this machine";
  return inventory;
}

const config::DeviceRequest kAuto{};
const config::DeviceRequest kCpu{DeviceKind::kCpu, std::nullopt};
const config::DeviceRequest kCuda{DeviceKind::kCuda, std::nullopt};
const config::GpuSelection kAll{};

config::DeviceRequest cuda(int64_t index) { return {DeviceKind::kCuda, index}; }
config::GpuSelection gpus(std::vector<int64_t> indices) { return {false, std::move(indices)}; }

// "key: problem": resolve_devices names the key only, and the run's plan
// places it in the file (RunPlan.DeviceErrorsPointAtTheirKey).
std::string device_error(const config::DeviceRequest& device, const config::GpuSelection& selection,
                         const DeviceInventory& inventory) {
  try {
    resolve_devices(device, selection, inventory);
  } catch (const ConfigError& e) {
    EXPECT_FALSE(e.where().known()) << e.what();
    return e.key() + ": " + e.problem();
  }
  ADD_FAILURE() << "no ConfigError for device " << device.text();
  return "";
}

TEST(ResolveDevices, AutoPicksCudaWhenAvailable) {
  const DevicePlan plan = resolve_devices(kAuto, kAll, machine(2));
  EXPECT_EQ(plan.kind, DeviceKind::kCuda);
  EXPECT_EQ(plan.gpus, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(plan.primary(), torch::Device(torch::kCUDA, 0));
  EXPECT_NE(plan.reason.find("auto chose CUDA"), std::string::npos);
}

TEST(ResolveDevices, AutoFallsBackToCpuAndSaysWhy) {
  const DevicePlan plan = resolve_devices(kAuto, kAll, machine(0));
  EXPECT_EQ(plan.kind, DeviceKind::kCpu);
  EXPECT_TRUE(plan.gpus.empty());
  EXPECT_EQ(plan.primary(), torch::Device(torch::kCPU));
  EXPECT_NE(plan.reason.find("no NVIDIA driver"), std::string::npos) << plan.reason;
  EXPECT_TRUE(plan.warning.empty()) << "no driver: nothing to warn about";
}

// Issue 20: a gpus list on a run without GPUs was silently ignored.
TEST(ResolveDevices, AGpusListOnACpuRunIsAnErrorNotIgnored) {
  const std::string on_cpu = device_error(kCpu, gpus({1}), machine(2));
  EXPECT_NE(on_cpu.find("gpus: selects GPUs, but the run is on the CPU (device: cpu requested)"), std::string::npos)
      << on_cpu;
  const std::string fell_back = device_error(kAuto, gpus({0, 1, 2, 3}), machine(0));
  EXPECT_NE(fell_back.find("the run is on the CPU (device: auto chose the CPU because CUDA is not available"),
            std::string::npos)
      << fell_back;
  EXPECT_NE(fell_back.find("remove gpus:"), std::string::npos);
  EXPECT_EQ(resolve_devices(kCpu, kAll, machine(2)).kind, DeviceKind::kCpu);
}

TEST(ResolveDevices, AutoOnTheCpuDespiteADriverWarns) {
  DeviceInventory old_driver = machine(0);
  old_driver.nvidia_driver_version = "535.104.05";
  old_driver.cuda_unavailable_reason = "the NVIDIA driver 535.104.05 runs CUDA 12.2 at most, but ...";
  const DevicePlan plan = resolve_devices(kAuto, kAll, old_driver);
  EXPECT_EQ(plan.kind, DeviceKind::kCpu);
  EXPECT_NE(plan.warning.find("training on the CPU although an NVIDIA driver (535.104.05) is installed: the NVIDIA "
                              "driver 535.104.05 runs CUDA 12.2"),
            std::string::npos)
      << plan.warning;
  const std::string what = device_error(kCuda, kAll, old_driver);
  EXPECT_NE(what.find("runs CUDA 12.2 at most"), std::string::npos) << what;
}

TEST(ResolveDevices, CudaWithoutGpuIsAnErrorNotAFallback) {
  const std::string what = device_error(kCuda, kAll, machine(0));
  EXPECT_NE(what.find("device: 'cuda' was requested but CUDA is not available"), std::string::npos) << what;
  EXPECT_NE(device_error(cuda(0), kAll, machine(0)).find("not available"), std::string::npos);
}

TEST(ResolveDevices, GpuListSelectsAndChecksRange) {
  const DevicePlan plan = resolve_devices(kAuto, gpus({1}), machine(2));
  EXPECT_EQ(plan.gpus, (std::vector<int64_t>{1}));
  const std::string what = device_error(kCuda, gpus({0, 2}), machine(2, "4,5"));
  EXPECT_NE(what.find("gpus: GPU 2 is not visible"), std::string::npos) << what;
  EXPECT_NE(what.find("0: Test GPU (physical 4), 1: Test GPU (physical 5)"), std::string::npos) << what;
  EXPECT_NE(what.find("CUDA_VISIBLE_DEVICES='4,5'"), std::string::npos) << what;
}

TEST(ResolveDevices, ExplicitCudaIndex) {
  const DevicePlan plan = resolve_devices(cuda(1), kAll, machine(2));
  EXPECT_EQ(plan.gpus, (std::vector<int64_t>{1}));
  EXPECT_EQ(plan.primary(), torch::Device(torch::kCUDA, 1));
  EXPECT_NE(device_error(cuda(2), kAll, machine(2)).find("GPU 2 is not visible"), std::string::npos);
  EXPECT_NE(device_error(cuda(0), gpus({1}), machine(2)).find("not both"), std::string::npos);
}

TEST(ResolveDevices, MaskedMachineUsesLogicalIndices) {
  // CUDA_VISIBLE_DEVICES=3 leaves one device, logical 0, physical 3.
  const DevicePlan plan = resolve_devices(kCuda, gpus({0}), machine(1, "3"));
  EXPECT_EQ(plan.gpus, (std::vector<int64_t>{0}));
  EXPECT_NE(device_error(kAuto, gpus({1}), machine(1, "3")).find("(physical 3)"), std::string::npos);
}

TEST(ResolveDevices, CpuAndMps) {
  EXPECT_EQ(resolve_devices(kCpu, kAll, machine(2)).kind, DeviceKind::kCpu);
  EXPECT_NE(device_error({DeviceKind::kMps, std::nullopt}, kAll, machine(0)).find("MPS (Apple GPU) is not available"),
            std::string::npos);
}

}  // namespace
}  // namespace gputrain::device
