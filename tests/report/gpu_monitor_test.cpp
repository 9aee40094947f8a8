// The GPU monitor without a GPU: NVML missing (this machine), and a fake NVML
// library with fixed readings for the sampling and the per-epoch summaries.
#include "gputrain/report/gpu_monitor.h"
#include "support/paths.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <thread>

namespace gputrain::report {
namespace {

using namespace std::chrono_literals;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

struct Recorder : train::TrainObserver {
  std::vector<train::EpochMetrics> epochs;
  int steps = 0;
  void on_step(const train::StepMetrics&) override { ++steps; }
  void on_epoch(const train::EpochMetrics& m) override { epochs.push_back(m); }
};

TEST(GpuMonitor, MissingNvmlLeavesTheMonitorOffCleanly) {
  GpuMonitor monitor({{0, ""}}, 10ms, "libnvidia-ml-absent.so.1");
  EXPECT_FALSE(monitor.available());
  EXPECT_TRUE(has(monitor.unavailable_reason(), "libnvidia-ml-absent.so.1 could not be loaded"))
      << monitor.unavailable_reason();
  EXPECT_TRUE(monitor.take_window().empty());

  Recorder next;
  GpuMonitorObserver observer(&monitor, LoaderSettings{}, next);
  train::EpochMetrics m;
  m.epoch = 1;
  observer.on_epoch(m);
  observer.on_step({});
  ASSERT_EQ(next.epochs.size(), 1u);
  EXPECT_TRUE(next.epochs[0].gpus.empty());
  EXPECT_EQ(next.steps, 1);

  // On a machine without the driver (this project's CI) the default name is absent too.
  if (void* nvml = dlopen(device::kNvmlLibrary, RTLD_NOW | RTLD_LOCAL)) {
    dlclose(nvml);
  } else {
    GpuMonitor absent({{0, ""}}, 10ms);
    EXPECT_FALSE(absent.available());
    EXPECT_TRUE(has(absent.unavailable_reason(), device::kNvmlLibrary)) << absent.unavailable_reason();
  }
}

TEST(GpuMonitor, NothingToWatchOffCuda) {
  device::DeviceInventory inventory;
  EXPECT_TRUE(monitored_gpus(inventory, {torch::Device(torch::kCPU)}).empty());
  GpuMonitor monitor({}, 10ms, testing::kFakeNvmlPath);
  EXPECT_FALSE(monitor.available());
  EXPECT_TRUE(has(monitor.unavailable_reason(), "no CUDA device")) << monitor.unavailable_reason();
  // monitored_gpus maps CUDA devices to the PCI bus ids the inventory knows.
  inventory.gpus.resize(2);
  inventory.gpus[0].logical_index = 0;
  inventory.gpus[0].pci_bus_id = "00000000:3b:00.0";
  inventory.gpus[1].logical_index = 1;
  inventory.gpus[1].pci_bus_id = "00000000:5e:00.0";
  const auto gpus = monitored_gpus(inventory, {torch::Device(torch::kCUDA, 1)});
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].index, 1);
  EXPECT_EQ(gpus[0].pci_bus_id, "00000000:5e:00.0");
}

TEST(GpuMonitor, SamplesEveryGpuOfAFakeNvml) {
  // GPU 0 by NVML index, GPU 1 by its PCI bus id.
  GpuMonitor monitor({{0, ""}, {1, "00000000:01:00.0"}}, 10ms, testing::kFakeNvmlPath);
  ASSERT_TRUE(monitor.available()) << monitor.unavailable_reason();
  std::this_thread::sleep_for(40ms);
  const auto window = monitor.take_window();
  ASSERT_EQ(window.size(), 2u);
  EXPECT_EQ(window[0].index, 0);
  EXPECT_GE(window[0].samples, 2);  // the thread's readings plus the one taken now
  EXPECT_DOUBLE_EQ(window[0].util_mean, 30.0);
  EXPECT_DOUBLE_EQ(window[0].util_max, 30.0);
  EXPECT_EQ(window[0].memory_used_max, int64_t{1} << 30);
  ASSERT_TRUE(window[0].power_mean_w.has_value());
  EXPECT_DOUBLE_EQ(*window[0].power_mean_w, 150.0);
  EXPECT_DOUBLE_EQ(window[0].temperature_max_c.value_or(0), 50.0);
  EXPECT_DOUBLE_EQ(window[1].util_mean, 50.0);
  EXPECT_EQ(window[1].memory_used_max, int64_t{2} << 30);
  EXPECT_FALSE(window[1].power_mean_w.has_value()) << "not supported is left out, not zero";
  EXPECT_DOUBLE_EQ(window[1].temperature_max_c.value_or(0), 51.0);

  const auto next = monitor.take_window();  // a fresh window, never empty
  ASSERT_EQ(next.size(), 2u);
  EXPECT_GE(next[0].samples, 1);
  EXPECT_LT(next[0].samples, window[0].samples + 5);

  // A GPU NVML cannot find turns the monitor off, naming it.
  GpuMonitor lost({{5, ""}}, 10ms, testing::kFakeNvmlPath);
  EXPECT_FALSE(lost.available());
  EXPECT_TRUE(has(lost.unavailable_reason(), "cuda:5")) << lost.unavailable_reason();
  EXPECT_TRUE(has(lost.unavailable_reason(), "Not Found")) << lost.unavailable_reason();
  GpuMonitor mig({{2, ""}}, 10ms, testing::kFakeNvmlPath);
  EXPECT_FALSE(mig.available());
  EXPECT_TRUE(has(mig.unavailable_reason(), "no utilization for cuda:2")) << mig.unavailable_reason();
}

TEST(GpuMonitorObserver, AddsEachEpochsFiguresBeforePassingItOn) {
  GpuMonitor monitor({{0, ""}, {1, ""}}, 10ms, testing::kFakeNvmlPath);
  Recorder next;
  GpuMonitorObserver observer(&monitor, LoaderSettings{}, next);
  train::EpochMetrics m;
  m.epoch = 3;
  m.epoch_s = 1.0;
  observer.on_epoch(m);
  ASSERT_EQ(next.epochs.size(), 1u);
  ASSERT_EQ(next.epochs[0].gpus.size(), 2u);
  EXPECT_EQ(next.epochs[0].epoch, 3);
  EXPECT_DOUBLE_EQ(next.epochs[0].gpus[1].util_max, 50.0);

  GpuMonitorObserver passthrough(nullptr, LoaderSettings{}, next);
  passthrough.on_epoch(m);
  EXPECT_TRUE(next.epochs.back().gpus.empty());
}

TEST(UtilizationHint, NamesDataLoadingWhenTheLoaderWaitedElseSmallBatches) {
  const LoaderSettings data{2, 64};
  train::EpochMetrics m;
  m.epoch = 2;
  m.epoch_s = 10.0;
  EXPECT_EQ(utilization_hint(m, data), "") << "not monitored: no hint";
  m.gpus.resize(2);
  m.gpus[0].util_mean = 20;
  m.gpus[1].util_mean = 40;  // mean 30%
  m.loader_wait_s = 4.0;
  const std::string loading = utilization_hint(m, data);
  EXPECT_TRUE(has(loading, "GPU utilization averaged 30% in epoch 2")) << loading;
  EXPECT_TRUE(has(loading, "waited 4.0 s of the epoch's 10.0 s")) << loading;
  EXPECT_TRUE(has(loading, "data loading")) << loading;
  EXPECT_TRUE(has(loading, "data.num_workers (now 2)")) << loading;
  m.loader_wait_s = 0.2;
  const std::string small = utilization_hint(m, data);
  EXPECT_TRUE(has(small, "too small")) << small;
  EXPECT_TRUE(has(small, "data.batch_size (now 64)")) << small;
  m.gpus[0].util_mean = 60;
  m.gpus[1].util_mean = 50;
  EXPECT_EQ(utilization_hint(m, data), "") << "busy enough";
}

}  // namespace
}  // namespace gputrain::report
