#include "gputrain/device/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>

namespace gputrain::device {

NvmlLibrary::NvmlLibrary(const std::string& path) : path_(path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    reason_ = fmt::format("{} could not be loaded ({})", path, why ? why : "unknown reason");
    return;
  }
  nvml::Return (*init)() = nullptr;
  if (!bind(init, "nvmlInit_v2") || !bind(shutdown_, "nvmlShutdown") || !bind(error_string_, "nvmlErrorString")) {
    return;
  }
  const nvml::Return status = init();
  if (status != nvml::kSuccess) {
    reason_ = fmt::format("nvmlInit failed: {}", error(status));
    return;
  }
  initialised_ = true;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) shutdown_();
  if (handle_ != nullptr) dlclose(handle_);
}

void* NvmlLibrary::symbol(const char* name) {
  void* found = handle_ != nullptr ? dlsym(handle_, name) : nullptr;
  if (found == nullptr && handle_ != nullptr) reason_ = fmt::format("{} has no {}", path_, name);
  return found;
}

std::string NvmlLibrary::error(nvml::Return code) const {
  return error_string_ ? error_string_(code) : fmt::format("NVML error {}", code);
}

std::optional<DriverInfo> read_driver(NvmlLibrary& nvml) {
  if (!nvml.ok()) return std::nullopt;
  nvml::Return (*version)(char*, unsigned int) = nullptr;
  nvml::Return (*cuda_version)(int*) = nullptr;
  if (!nvml.bind(version, "nvmlSystemGetDriverVersion") ||
      !nvml.bind(cuda_version, "nvmlSystemGetCudaDriverVersion_v2")) {
    return std::nullopt;
  }
  std::array<char, 96> text{};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE is 80
  DriverInfo info;
  if (version(text.data(), static_cast<unsigned int>(text.size())) != nvml::kSuccess) return std::nullopt;
  info.version = text.data();
  if (cuda_version(&info.cuda_version) != nvml::kSuccess) info.cuda_version = 0;
  return info;
}

std::optional<int64_t> free_memory(NvmlLibrary& nvml, const std::string& pci_bus_id) {
  if (!nvml.ok() || pci_bus_id.empty()) return std::nullopt;
  nvml::Return (*by_pci_bus_id)(const char*, nvml::Device*) = nullptr;
  nvml::Return (*memory)(nvml::Device, nvml::Memory*) = nullptr;
  if (!nvml.bind(by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") || !nvml.bind(memory, "nvmlDeviceGetMemoryInfo")) {
    return std::nullopt;
  }
  nvml::Device device = nullptr;
  nvml::Memory info{};
  if (by_pci_bus_id(pci_bus_id.c_str(), &device) != nvml::kSuccess || memory(device, &info) != nvml::kSuccess) {
    return std::nullopt;
  }
  return static_cast<int64_t>(info.free);
}

}  // namespace gputrain::device
