#pragma once
// Turns `device:` and `gpus:` into the devices a run uses, or a ConfigError
// naming the key and listing what is visible.
#include <torch/types.h>

#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/device/inventory.h"

namespace gputrain::device {

using DeviceKind = config::DeviceKind;  // DevicePlan's kind is never kAuto

struct DevicePlan {
  DeviceKind kind = DeviceKind::kCpu;  // never kAuto
  std::vector<int64_t> gpus;           // logical indices used, primary first; empty off CUDA
  std::string reason;                  // why this device, for the log
  // Said as a warning at run start: device: auto fell back to the CPU
  // although an NVIDIA driver is installed (too old, say).
  std::string warning;

  torch::Device primary() const;
  std::vector<torch::Device> devices() const;  // one per GPU, or the single CPU/MPS device
};

DevicePlan resolve_devices(const config::DeviceRequest& device, const config::GpuSelection& gpus,
                           const DeviceInventory& inventory);

// "0: NVIDIA H100 (physical 2), 1: ..." or "none".
std::string describe_visible(const DeviceInventory& inventory);

}  // namespace gputrain::device
