#pragma once
#include <optional>
#include <string>

#include "gputrain/device/inventory.h"

namespace gputrain::device {

// Asks LibTorch and the CUDA runtime what is there. `cuda_visible_devices` is
// the environment variable as app/ read it (unset: std::nullopt); it is only
// used to report the logical-to-physical mapping, CUDA applies it itself.
DeviceInventory probe_devices(const std::optional<std::string>& cuda_visible_devices);

}  // namespace gputrain::device
