#pragma once
// The slice of nvml.h the GPU monitor uses, declared here because NVML is
// loaded at run time and its header is not installed everywhere. NVML keeps
// these types and signatures stable across driver releases (the _v2 entry
// points exist since driver 325). The tests' stand-in library implements them.
namespace gputrain::report::nvml {

using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;
constexpr Return kNotSupported = 3;
constexpr Return kNotFound = 6;

struct DeviceSt;  // opaque to callers
using Device = DeviceSt*;

struct Utilization {
  unsigned int gpu;  // percent of the sample period a kernel ran
  unsigned int memory;
};

struct Memory {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
};

constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU

}  // namespace gputrain::report::nvml
