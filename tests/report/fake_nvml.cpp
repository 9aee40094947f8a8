// A stand-in for libnvidia-ml.so.1 with fixed readings, so the monitor's
// loading, sampling and summaries are tested on machines without a GPU.
// GPU i: utilization 30 + 20 i %, 1 + i GiB used, 150 W (GPU 1: power not
// supported), 50 + i degrees; GPU 2 reports no utilization (as a MIG instance).
// NVML finds a GPU by index or by the bus number of its PCI bus id
// ("00000000:0i:00.0"). The driver is 535.104.05, which runs CUDA 12.2 at most.
#include <cstdio>
#include <cstring>

#include "gputrain/device/nvml.h"

namespace nvml = gputrain::device::nvml;

struct gputrain::device::nvml::DeviceSt {
  unsigned int index;
};

namespace {
nvml::DeviceSt devices[3] = {{0}, {1}, {2}};
}  // namespace

extern "C" {

nvml::Return nvmlInit_v2() { return nvml::kSuccess; }
nvml::Return nvmlShutdown() { return nvml::kSuccess; }
const char* nvmlErrorString(nvml::Return code) { return code == nvml::kNotFound ? "Not Found" : "Fake error"; }

nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml::Device* device) {
  if (index >= 3) return nvml::kNotFound;
  *device = &devices[index];
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvml::Device* device) {
  unsigned int domain = 0, bus = 0, slot = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function) != 4) return nvml::kNotFound;
  return nvmlDeviceGetHandleByIndex_v2(bus, device);
}

nvml::Return nvmlDeviceGetUtilizationRates(nvml::Device device, nvml::Utilization* out) {
  if (device->index == 2) return nvml::kNotSupported;
  out->gpu = 30 + 20 * device->index;
  out->memory = 10;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device device, nvml::Memory* out) {
  out->total = 8ull << 30;
  out->used = (1ull + device->index) << 30;
  out->free = out->total - out->used;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetPowerUsage(nvml::Device device, unsigned int* milliwatts) {
  if (device->index == 1) return nvml::kNotSupported;
  *milliwatts = 150000;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetTemperature(nvml::Device device, int, unsigned int* celsius) {
  *celsius = 50 + device->index;
  return nvml::kSuccess;
}

// A driver too old for LibTorch built with CUDA 13.0.
nvml::Return nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  std::strncpy(version, "535.104.05", length);
  return nvml::kSuccess;
}

nvml::Return nvmlSystemGetCudaDriverVersion_v2(int* cuda_version) {
  *cuda_version = 12020;
  return nvml::kSuccess;
}
}
