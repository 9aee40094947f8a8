#include "gputrain/device/inventory_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "gputrain/common/strings.h"
#include "gputrain/device/versions.h"

namespace gputrain::device {

namespace {
std::string or_none(const std::string& text) { return text.empty() ? "n/a" : text; }
std::string yes_no(bool value) { return value ? "yes" : "no"; }
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
}  // namespace

std::string format_inventory(const DeviceInventory& inv) {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<24}{}\n", label, value);
  };
  line("gputrain", version());
  line("LibTorch", torch_version());
  line("CUDA (built with)", inv.torch_built_with_cuda ? or_none(inv.cuda_build_version) : "no CUDA build");
  line("NVIDIA driver",
       inv.nvidia_driver_version.empty()
           ? "n/a"
           : fmt::format("{} (runs CUDA up to {})", inv.nvidia_driver_version, or_none(inv.cuda_driver_version)));
  line("cuDNN", or_none(inv.cudnn_version));
  line("NCCL", or_none(inv.nccl_version));
  line("CUDA available", inv.cuda_available ? "yes" : fmt::format("no ({})", inv.cuda_unavailable_reason));
  line("cuDNN available", yes_no(inv.cudnn_available));
  line("MPS available", yes_no(inv.mps_available));
  line("CUDA_VISIBLE_DEVICES", !inv.cuda_visible_devices                 ? "(unset: all devices)"
                               : trim(*inv.cuda_visible_devices).empty() ? "(set but empty: no GPUs visible)"
                                                                         : *inv.cuda_visible_devices);
  line("CPU threads", fmt::format("{} hardware, {} used by LibTorch", inv.cpu_threads, inv.torch_intra_threads));
  line("GPUs", std::to_string(inv.gpus.size()));
  for (const auto& gpu : inv.gpus) {
    out += fmt::format("  cuda:{} (physical {}): {}, compute {}.{}, {} SMs, {:.1f} GiB total, {}\n", gpu.logical_index,
                       gpu.physical_id, gpu.name, gpu.compute_major, gpu.compute_minor, gpu.multiprocessors,
                       gib(gpu.total_memory),
                       gpu.free_memory ? fmt::format("{:.1f} GiB free", gib(*gpu.free_memory)) : "free memory n/a");
  }
  return out;
}

std::string inventory_json(const DeviceInventory& inv) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const auto& gpu : inv.gpus) {
    gpus.push_back(
        {{"logical_index", gpu.logical_index},
         {"physical_id", gpu.physical_id},
         {"name", gpu.name},
         {"pci_bus_id", gpu.pci_bus_id},
         {"compute_capability", fmt::format("{}.{}", gpu.compute_major, gpu.compute_minor)},
         {"multiprocessors", gpu.multiprocessors},
         {"total_memory_bytes", gpu.total_memory},
         {"free_memory_bytes", gpu.free_memory ? nlohmann::ordered_json(*gpu.free_memory) : nlohmann::ordered_json()}});
  }
  const nlohmann::ordered_json report = {
      {"gputrain_version", version()},
      {"libtorch_version", torch_version()},
      {"torch_built_with_cuda", inv.torch_built_with_cuda},
      {"cuda_build_version", inv.cuda_build_version},
      {"nvidia_driver_version", inv.nvidia_driver_version},
      {"cuda_driver_version", inv.cuda_driver_version},
      {"cudnn_version", inv.cudnn_version},
      {"nccl_version", inv.nccl_version},
      {"cuda_available", inv.cuda_available},
      {"cuda_unavailable_reason", inv.cuda_unavailable_reason},
      {"cudnn_available", inv.cudnn_available},
      {"mps_available", inv.mps_available},
      {"cuda_visible_devices",
       inv.cuda_visible_devices ? nlohmann::ordered_json(*inv.cuda_visible_devices) : nlohmann::ordered_json()},
      {"cpu_threads", inv.cpu_threads},
      {"torch_intra_op_threads", inv.torch_intra_threads},
      {"gpus", gpus},
  };
  return report.dump(2) + "\n";
}

}  // namespace gputrain::device
