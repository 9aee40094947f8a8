#pragma once
// `watch nvidia-smi`, built in: while a run trains on CUDA, a background
// thread asks NVML every train.monitor_ms how busy, full, hot and power-hungry
// each GPU of the run is; each epoch then logs and records its mean and peak,
// and says what probably held the GPU back when it was busy less than half the
// time. NVML (libnvidia-ml.so.1, part of the driver) is loaded at run time:
// without it the monitor is off, which is not an error.
#include <torch/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gputrain/device/inventory.h"
#include "gputrain/device/nvml.h"
#include "gputrain/train/observer.h"

namespace gputrain::report {

struct MonitoredGpu {
  int64_t index = 0;       // logical CUDA index, as the run names it
  std::string pci_bus_id;  // how NVML finds it; empty: NVML's own index `index`
};

// The CUDA devices among `devices`, with their PCI bus ids from `inventory`
// (NVML numbers GPUs by bus, ignoring CUDA_VISIBLE_DEVICES).
std::vector<MonitoredGpu> monitored_gpus(const device::DeviceInventory& inventory,
                                         const std::vector<torch::Device>& devices);

class GpuMonitor {
 public:
  // Loads `library`, finds every GPU and starts sampling. When NVML or a GPU
  // is missing the monitor is unavailable: it logs why once and samples nothing.
  GpuMonitor(const std::vector<MonitoredGpu>& gpus, std::chrono::milliseconds interval,
             const std::string& library = device::kNvmlLibrary);
  ~GpuMonitor();  // stops the thread, shuts NVML down
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  bool available() const;
  const std::string& unavailable_reason() const;
  // One summary per GPU of the readings since the previous call (plus one
  // taken now, so a window is never empty); empty when unavailable.
  std::vector<train::GpuActivity> take_window();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// GPU utilization below this percentage in an epoch earns a hint.
inline constexpr double kLowUtilization = 50.0;

// The loader settings a hint names, so the user knows what to raise.
struct LoaderSettings {
  int64_t num_workers = 0;
  int64_t batch_size = 0;
};

// Why the GPUs of `m` were busy less than kLowUtilization percent of the
// epoch: data loading when the training thread spent at least a tenth of the
// epoch waiting for batches, otherwise batches too small to fill them. Empty
// when they were busy enough or not monitored.
std::string utilization_hint(const train::EpochMetrics& m, const LoaderSettings& loader);

// Adds the monitor's figures to each epoch's metrics, logs them (and the
// hint), then passes everything on to `next`. A null monitor adds nothing.
class GpuMonitorObserver : public train::TrainObserver {
 public:
  GpuMonitorObserver(GpuMonitor* monitor, const LoaderSettings& loader, train::TrainObserver& next);
  void on_progress(const train::Progress& p) override { next_.on_progress(p); }
  void on_step(const train::StepMetrics& m) override { next_.on_step(m); }
  void on_epoch(const train::EpochMetrics& m) override;

 private:
  GpuMonitor* monitor_;
  LoaderSettings loader_;
  train::TrainObserver& next_;
};

}  // namespace gputrain::report
