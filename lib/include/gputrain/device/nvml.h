#pragma once
// NVML (libnvidia-ml.so.1, part of the NVIDIA driver), loaded at run time:
// it answers what the driver is and how much memory each GPU has free without
// creating a CUDA context, and it is missing wherever no driver is installed,
// which is not an error. The slice of nvml.h used is declared here because
// the header is not installed everywhere; NVML keeps these types and
// signatures stable across driver releases. The tests' stand-in library
// implements them.
#include <cstdint>
#include <optional>
#include <string>

namespace gputrain::device {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

namespace nvml {

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

}  // namespace nvml

// One loaded and initialised NVML; shut down and unloaded when destroyed.
class NvmlLibrary {
 public:
  explicit NvmlLibrary(const std::string& path = kNvmlLibrary);  // never throws: see ok() and reason()
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return initialised_; }
  const std::string& reason() const { return reason_; }  // why not ok(), or why a symbol is missing
  // The named entry point, or nullptr (and reason() says which is missing).
  void* symbol(const char* name);
  template <typename Function>
  bool bind(Function*& function, const char* name) {
    function = reinterpret_cast<Function*>(symbol(name));
    return function != nullptr;
  }
  std::string error(nvml::Return code) const;

 private:
  void* handle_ = nullptr;
  bool initialised_ = false;
  std::string path_;
  std::string reason_;
  const char* (*error_string_)(nvml::Return) = nullptr;
  nvml::Return (*shutdown_)() = nullptr;
};

struct DriverInfo {
  std::string version;   // "580.65.06"
  int cuda_version = 0;  // the newest CUDA it runs, CUDA's encoding (13000)
};

// What the driver says about itself; nullopt without NVML.
std::optional<DriverInfo> read_driver(NvmlLibrary& nvml);

// Free memory of the GPU at `pci_bus_id`, in bytes; nullopt when NVML cannot tell.
std::optional<int64_t> free_memory(NvmlLibrary& nvml, const std::string& pci_bus_id);

}  // namespace gputrain::device
