#pragma once
// Made-up machines for the tests that plan runs: an inventory as the probe
// would report it, which nothing in the plan touches.
#include <string>

#include "gputrain/device/inventory.h"

namespace gputrain::testing {

// A machine with `count` GPUs (0: CPU only).
inline device::DeviceInventory machine(int count) {
  device::DeviceInventory inventory;
  inventory.torch_built_with_cuda = true;
  inventory.cuda_available = count > 0;
  if (count == 0) inventory.cuda_unavailable_reason = "no NVIDIA driver was found on this machine";
  for (int i = 0; i < count; ++i) {
    device::GpuInfo gpu;
    gpu.logical_index = i;
    gpu.physical_id = std::to_string(i);
    gpu.name = "Test GPU";
    inventory.gpus.push_back(gpu);
  }
  return inventory;
}

}  // namespace gputrain::testing
