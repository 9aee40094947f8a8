#include "gputrain/report/gpu_monitor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <type_traits>

#include "gputrain/device/nvml.h"

namespace gputrain::report {

namespace {

namespace nvml = device::nvml;

struct NvmlApi {
  nvml::Return (*by_index)(unsigned int, nvml::Device*) = nullptr;
  nvml::Return (*by_pci_bus_id)(const char*, nvml::Device*) = nullptr;
  nvml::Return (*utilization)(nvml::Device, nvml::Utilization*) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*power)(nvml::Device, unsigned int*) = nullptr;  // milliwatts
  nvml::Return (*temperature)(nvml::Device, int, unsigned int*) = nullptr;
};

// Readings of one GPU since the window opened.
struct Window {
  int64_t samples = 0;
  double util_sum = 0;
  double util_max = 0;
  int64_t memory_max = 0;
  double power_sum = 0;
  int64_t power_samples = 0;
  double temperature_max = 0;
  int64_t temperature_samples = 0;
};

struct Target {
  int64_t index = 0;
  nvml::Device handle = nullptr;
  Window window;
};

double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

struct GpuMonitor::State {
  std::unique_ptr<device::NvmlLibrary> nvml;
  NvmlApi api;
  std::string reason;
  std::vector<Target> targets;
  std::chrono::milliseconds interval{500};
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  std::string error(nvml::Return code) const { return nvml->error(code); }

  // Loads the library and every symbol; sets `reason` and returns false on the first miss.
  bool load(const std::string& path) {
    nvml = std::make_unique<device::NvmlLibrary>(path);
    const bool complete = nvml->ok() && nvml->bind(api.by_index, "nvmlDeviceGetHandleByIndex_v2") &&
                          nvml->bind(api.by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") &&
                          nvml->bind(api.utilization, "nvmlDeviceGetUtilizationRates") &&
                          nvml->bind(api.memory, "nvmlDeviceGetMemoryInfo") &&
                          nvml->bind(api.power, "nvmlDeviceGetPowerUsage") &&
                          nvml->bind(api.temperature, "nvmlDeviceGetTemperature");
    if (!complete) reason = nvml->reason();
    return complete;
  }

  bool open(const std::vector<MonitoredGpu>& gpus, const std::string& path) {
    if (gpus.empty()) {
      reason = "no CUDA device to watch";
      return false;
    }
    if (!load(path)) return false;
    for (const auto& gpu : gpus) {
      Target target;
      target.index = gpu.index;
      const nvml::Return found = gpu.pci_bus_id.empty()
                                     ? api.by_index(static_cast<unsigned int>(gpu.index), &target.handle)
                                     : api.by_pci_bus_id(gpu.pci_bus_id.c_str(), &target.handle);
      if (found != nvml::kSuccess) {
        reason = fmt::format("NVML does not find cuda:{} ({}): {}", gpu.index,
                             gpu.pci_bus_id.empty() ? "by index" : "PCI " + gpu.pci_bus_id, error(found));
        return false;
      }
      // Utilization is what the monitor is for; MIG instances, for one, do not report it.
      nvml::Utilization util{};
      const nvml::Return readable = api.utilization(target.handle, &util);
      if (readable != nvml::kSuccess) {
        reason = fmt::format("NVML reports no utilization for cuda:{}: {}", gpu.index, error(readable));
        return false;
      }
      targets.push_back(target);
    }
    return true;
  }

  // One reading of every GPU into its window; a figure the board does not
  // report (power on some models) is left out, not counted as zero.
  void sample() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& t : targets) {
      nvml::Utilization util{};
      if (api.utilization(t.handle, &util) != nvml::kSuccess) continue;
      Window& w = t.window;
      ++w.samples;
      w.util_sum += util.gpu;
      w.util_max = std::max(w.util_max, static_cast<double>(util.gpu));
      nvml::Memory memory{};
      if (api.memory(t.handle, &memory) == nvml::kSuccess) {
        w.memory_max = std::max(w.memory_max, static_cast<int64_t>(memory.used));
      }
      unsigned int milliwatts = 0;
      if (api.power(t.handle, &milliwatts) == nvml::kSuccess) {
        w.power_sum += milliwatts / 1000.0;
        ++w.power_samples;
      }
      unsigned int celsius = 0;
      if (api.temperature(t.handle, nvml::kTemperatureGpu, &celsius) == nvml::kSuccess) {
        w.temperature_max = std::max(w.temperature_max, static_cast<double>(celsius));
        ++w.temperature_samples;
      }
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      lock.unlock();
      sample();
      lock.lock();
      wake.wait_for(lock, interval, [this] { return stopping; });
    }
  }
};

std::vector<MonitoredGpu> monitored_gpus(const device::DeviceInventory& inventory,
                                         const std::vector<torch::Device>& devices) {
  std::vector<MonitoredGpu> out;
  for (const auto& device : devices) {
    if (!device.is_cuda()) continue;
    MonitoredGpu gpu;
    gpu.index = device.has_index() ? device.index() : 0;
    for (const auto& info : inventory.gpus) {
      if (info.logical_index == gpu.index) gpu.pci_bus_id = info.pci_bus_id;
    }
    out.push_back(gpu);
  }
  return out;
}

GpuMonitor::GpuMonitor(const std::vector<MonitoredGpu>& gpus, std::chrono::milliseconds interval,
                       const std::string& library)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.interval = interval;
  if (!s.open(gpus, library)) {
    s.targets.clear();
    spdlog::info("GPU monitor off: {}; utilization will not be recorded", s.reason);
    return;
  }
  std::vector<std::string> names;
  for (const auto& t : s.targets) names.push_back(fmt::format("cuda:{}", t.index));
  spdlog::info("GPU monitor: NVML samples {} every {} ms", fmt::join(names, ", "), interval.count());
  s.thread = std::thread([&s] { s.run(); });
}

GpuMonitor::~GpuMonitor() {
  State& s = *state_;
  if (s.thread.joinable()) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.stopping = true;
    }
    s.wake.notify_all();
    s.thread.join();
  }
}

bool GpuMonitor::available() const { return !state_->targets.empty(); }

const std::string& GpuMonitor::unavailable_reason() const { return state_->reason; }

std::vector<train::GpuActivity> GpuMonitor::take_window() {
  State& s = *state_;
  if (!available()) return {};
  s.sample();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<train::GpuActivity> out;
  for (auto& t : s.targets) {
    const Window& w = t.window;
    train::GpuActivity a;
    a.index = t.index;
    a.samples = w.samples;
    a.util_mean = w.samples > 0 ? w.util_sum / static_cast<double>(w.samples) : 0.0;
    a.util_max = w.util_max;
    a.memory_used_max = w.memory_max;
    if (w.power_samples > 0) a.power_mean_w = w.power_sum / static_cast<double>(w.power_samples);
    if (w.temperature_samples > 0) a.temperature_max_c = w.temperature_max;
    out.push_back(a);
    t.window = Window{};
  }
  return out;
}

std::string utilization_hint(const train::EpochMetrics& m, const LoaderSettings& loader) {
  if (m.gpus.empty()) return "";
  double util = 0;
  for (const auto& g : m.gpus) util += g.util_mean;
  util /= static_cast<double>(m.gpus.size());
  if (util >= kLowUtilization) return "";
  if (m.loader_wait_s >= 0.1 * m.epoch_s) {
    return fmt::format(
        "GPU utilization averaged {:.0f}% in epoch {}: the training thread waited {:.1f} s of the epoch's {:.1f} s "
        "for batches, so data loading is the likely bottleneck; raise data.num_workers (now {}) or data.prefetch",
        util, m.epoch, m.loader_wait_s, m.epoch_s, loader.num_workers);
  }
  return fmt::format(
      "GPU utilization averaged {:.0f}% in epoch {} although batches were ready (loader wait {:.1f} s of {:.1f} s): "
      "the batches are likely too small to keep the GPU busy; raise data.batch_size (now {}) or train a larger model",
      util, m.epoch, m.loader_wait_s, m.epoch_s, loader.batch_size);
}

GpuMonitorObserver::GpuMonitorObserver(GpuMonitor* monitor, const LoaderSettings& loader, train::TrainObserver& next)
    : monitor_(monitor), loader_(loader), next_(next) {}

void GpuMonitorObserver::on_epoch(const train::EpochMetrics& m) {
  if (monitor_ == nullptr || !monitor_->available()) {
    next_.on_epoch(m);
    return;
  }
  train::EpochMetrics with_gpus = m;
  with_gpus.gpus = monitor_->take_window();
  for (const auto& g : with_gpus.gpus) {
    spdlog::info("Epoch {} cuda:{}: GPU utilization mean {:.0f}%, max {:.0f}%; memory used up to {:.2f} GiB{}{}",
                 m.epoch, g.index, g.util_mean, g.util_max, gib(g.memory_used_max),
                 g.power_mean_w ? fmt::format(", {:.0f} W", *g.power_mean_w) : "",
                 g.temperature_max_c ? fmt::format(", up to {:.0f} C", *g.temperature_max_c) : "");
  }
  const std::string hint = utilization_hint(with_gpus, loader_);
  if (!hint.empty()) spdlog::warn("{}", hint);
  next_.on_epoch(with_gpus);
}

}  // namespace gputrain::report
