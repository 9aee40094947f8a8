#include "gputrain/device/resolve.h"

#include <fmt/format.h>

#include <algorithm>

#include "gputrain/common/error.h"

namespace gputrain::device {

torch::Device DevicePlan::primary() const {
  switch (kind) {
    case DeviceKind::kCuda:
      return {torch::kCUDA, static_cast<c10::DeviceIndex>(gpus.front())};
    case DeviceKind::kMps:
      return {torch::kMPS};
    default:
      return {torch::kCPU};
  }
}

std::vector<torch::Device> DevicePlan::devices() const {
  if (kind != DeviceKind::kCuda) return {primary()};
  std::vector<torch::Device> out;
  for (int64_t gpu : gpus) out.emplace_back(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
  return out;
}

std::string describe_visible(const DeviceInventory& inventory) {
  if (inventory.gpus.empty()) return "none";
  std::string out;
  for (const auto& gpu : inventory.gpus) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}: {} (physical {})", gpu.logical_index, gpu.name, gpu.physical_id);
  }
  return out;
}

namespace {

std::string visibility_note(const DeviceInventory& inventory) {
  return inventory.cuda_visible_devices ? fmt::format("; CUDA_VISIBLE_DEVICES='{}'", *inventory.cuda_visible_devices)
                                        : "";
}

// The run's plan places the error at the key's line.
[[noreturn]] void fail(const std::string& key, const std::string& problem) { throw ConfigError({}, key, problem); }

// The GPUs `gpus:` selects, checked against what is visible.
std::vector<int64_t> selected_gpus(const config::GpuSelection& selection, const DeviceInventory& inventory) {
  const auto visible = static_cast<int64_t>(inventory.gpus.size());
  if (selection.all) {
    std::vector<int64_t> all;
    for (int64_t i = 0; i < visible; ++i) all.push_back(i);
    return all;
  }
  for (int64_t index : selection.indices) {
    if (index >= visible) {
      fail("gpus", fmt::format("GPU {} is not visible; visible GPUs: {}{}. Indices count after CUDA_VISIBLE_DEVICES.",
                               index, describe_visible(inventory), visibility_note(inventory)));
    }
  }
  return selection.indices;
}

// A gpus list on a run that uses no GPU would be ignored; say so instead.
void reject_gpus_off_cuda(const config::GpuSelection& selection, const DevicePlan& plan) {
  if (selection.all) return;
  fail("gpus",
       fmt::format("selects GPUs, but the run is on the {} ({}), which uses none; remove gpus:, or use device: cuda "
                   "on a machine with those GPUs",
                   plan.kind == DeviceKind::kMps ? "MPS device" : "CPU", plan.reason));
}

}  // namespace

DevicePlan resolve_devices(const config::DeviceRequest& spec, const config::GpuSelection& gpus,
                           const DeviceInventory& inventory) {
  DevicePlan plan;
  switch (spec.kind) {
    case DeviceKind::kCpu:
      plan.kind = DeviceKind::kCpu;
      plan.reason = "device: cpu requested";
      reject_gpus_off_cuda(gpus, plan);
      return plan;
    case DeviceKind::kMps:
      if (!inventory.mps_available) {
        fail("device", "MPS (Apple GPU) is not available on this machine; use device: cpu or auto");
      }
      plan.kind = DeviceKind::kMps;
      plan.reason = "device: mps requested";
      reject_gpus_off_cuda(gpus, plan);
      return plan;
    case DeviceKind::kAuto:
      if (!inventory.cuda_available) {
        plan.kind = DeviceKind::kCpu;
        plan.reason = fmt::format("device: auto chose the CPU because CUDA is not available ({})",
                                  inventory.cuda_unavailable_reason);
        if (!inventory.nvidia_driver_version.empty()) {
          plan.warning = fmt::format("training on the CPU although an NVIDIA driver ({}) is installed: {}",
                                     inventory.nvidia_driver_version, inventory.cuda_unavailable_reason);
        }
        reject_gpus_off_cuda(gpus, plan);
        return plan;
      }
      plan.kind = DeviceKind::kCuda;
      plan.gpus = selected_gpus(gpus, inventory);
      plan.reason = fmt::format("device: auto chose CUDA ({} visible GPU{})", inventory.gpus.size(),
                                inventory.gpus.size() == 1 ? "" : "s");
      return plan;
    case DeviceKind::kCuda:
      break;
  }
  if (!inventory.cuda_available) {
    fail("device",
         fmt::format("'{}' was requested but CUDA is not available ({}). Use device: cpu, or device: auto to fall "
                     "back to the CPU.",
                     spec.text(), inventory.cuda_unavailable_reason));
  }
  plan.kind = DeviceKind::kCuda;
  if (spec.index) {
    if (*spec.index >= static_cast<int64_t>(inventory.gpus.size())) {
      fail("device", fmt::format("GPU {} is not visible; visible GPUs: {}{}", *spec.index, describe_visible(inventory),
                                 visibility_note(inventory)));
    }
    if (!gpus.all) {
      fail("gpus", fmt::format("give GPUs either as device: {} or as a gpus list, not both", spec.text()));
    }
    plan.gpus = {*spec.index};
    plan.reason = fmt::format("device: {} requested", spec.text());
    return plan;
  }
  plan.gpus = selected_gpus(gpus, inventory);
  plan.reason = "device: cuda requested";
  return plan;
}

}  // namespace gputrain::device
