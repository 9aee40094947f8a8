#pragma once
#include <optional>
#include <string>

#include "gputrain/device/inventory.h"
#include "gputrain/device/nvml.h"

namespace gputrain::device {

// Asks LibTorch and NVML what is there, creating no CUDA context on any
// device (so N ranks on N GPUs hold one context each, not N).
// `cuda_visible_devices` is the environment variable as app/ read it (unset:
// std::nullopt); it is only used to report the logical-to-physical mapping,
// CUDA applies it itself. `nvml_library` is replaced by the tests.
DeviceInventory probe_devices(const std::optional<std::string>& cuda_visible_devices,
                              const std::string& nvml_library = kNvmlLibrary);

}  // namespace gputrain::device
