#pragma once
// What the machine offers: a plain snapshot the rest of gputrain reasons about.
// The probe that fills it is separate, so device resolution and the report are
// tested with made-up inventories on machines without a GPU.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/device/nvml.h"

namespace gputrain::device {

struct GpuInfo {
  int64_t logical_index = 0;  // as LibTorch numbers it, after CUDA_VISIBLE_DEVICES
  std::string physical_id;    // the entry of CUDA_VISIBLE_DEVICES it maps to
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t total_memory = 0;            // bytes
  std::optional<int64_t> free_memory;  // bytes, from NVML (no CUDA context); unset when it cannot tell
  std::string pci_bus_id;              // "00000000:3b:00.0": how NVML, which ignores CUDA's numbering, finds it
};

struct DeviceInventory {
  bool torch_built_with_cuda = false;
  bool cuda_available = false;
  bool cudnn_available = false;
  bool mps_available = false;
  std::string cuda_unavailable_reason;  // why cuda_available is false
  std::string cuda_build_version;       // CUDA LibTorch was built with, e.g. "13.0"
  std::string nvidia_driver_version;    // "580.65.06", from NVML; empty without the driver
  std::string cuda_driver_version;      // highest CUDA version the driver supports
  std::string cudnn_version;
  std::string nccl_version;
  std::optional<std::string> cuda_visible_devices;  // unset: all devices visible
  std::vector<GpuInfo> gpus;
  int cpu_threads = 0;          // hardware threads
  int torch_intra_threads = 0;  // LibTorch's intra-op pool
};

// Physical ids of the devices CUDA_VISIBLE_DEVICES leaves visible, in logical
// order, following CUDA's rule that the first invalid entry ends the list.
// Unset: {"0", "1", ...} up to `device_count`.
std::vector<std::string> visible_physical_ids(const std::optional<std::string>& cuda_visible_devices,
                                              int64_t device_count);

// "13.0" from 13000 (CUDA's encoding); "" for 0.
std::string cuda_version_string(long encoded);

// What is known when CUDA did not start, for explain_cuda_unavailable.
struct CudaStartFacts {
  std::optional<std::string> cuda_visible_devices;
  std::optional<DriverInfo> driver;  // from NVML; nullopt: no driver found
  long build_version = 0;            // the CUDA LibTorch was built with, CUDA's encoding
  std::string error;                 // LibTorch's own words, when it gave any
};

// Why CUDA is not available, said so that the user knows what to change: an
// empty CUDA_VISIBLE_DEVICES, no driver, or a driver older than the CUDA
// LibTorch was built for (a CUDA 13 build needs an R580 driver or newer).
std::string explain_cuda_unavailable(const CudaStartFacts& facts);

}  // namespace gputrain::device
