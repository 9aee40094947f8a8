#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gputrain/device/inventory_report.h"
#include "gputrain/device/probe.h"

namespace gputrain::device {
namespace {

DeviceInventory two_gpus() {
  DeviceInventory inv;
  inv.torch_built_with_cuda = true;
  inv.cuda_available = true;
  inv.cudnn_available = true;
  inv.cuda_build_version = "13.0";
  inv.cuda_driver_version = "13.0";
  inv.cudnn_version = "9.19.0";
  inv.nccl_version = "2.28.9";
  inv.cuda_visible_devices = "2,3";
  inv.cpu_threads = 16;
  for (int i = 0; i < 2; ++i) {
    inv.gpus.push_back({i, std::to_string(i + 2), "NVIDIA H100", 9, 0, 132, int64_t{80} << 30, int64_t{79} << 30,
                        "00000000:0" + std::to_string(i + 2) + ":00.0"});
  }
  return inv;
}

TEST(InventoryReport, TextListsEveryGpuWithPhysicalId) {
  const std::string text = format_inventory(two_gpus());
  EXPECT_NE(text.find("cuda:0 (physical 2): NVIDIA H100, compute 9.0, 132 SMs, 80.0 GiB total"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cuda:1 (physical 3)"), std::string::npos);
  EXPECT_NE(text.find("CUDA_VISIBLE_DEVICES    2,3"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL                    2.28.9"), std::string::npos);
}

TEST(InventoryReport, JsonCarriesTheSameFacts) {
  const auto json = nlohmann::json::parse(inventory_json(two_gpus()));
  EXPECT_TRUE(json["cuda_available"].get<bool>());
  EXPECT_EQ(json["gpus"].size(), 2u);
  EXPECT_EQ(json["gpus"][1]["physical_id"], "3");
  EXPECT_EQ(json["gpus"][1]["pci_bus_id"], "00000000:03:00.0");
  EXPECT_EQ(json["gpus"][0]["compute_capability"], "9.0");
  EXPECT_EQ(json["cuda_visible_devices"], "2,3");
}

TEST(InventoryReport, NoGpuSaysCudaIsNotAvailable) {
  DeviceInventory inv;
  inv.cuda_unavailable_reason = "no NVIDIA driver was found on this machine";
  const std::string text = format_inventory(inv);
  EXPECT_NE(text.find("CUDA available          no (no NVIDIA driver was found on this machine)"), std::string::npos)
      << text;
  EXPECT_TRUE(nlohmann::json::parse(inventory_json(inv))["cuda_visible_devices"].is_null());
}

TEST(InventoryReport, EmptyVisibleDevicesIsSpelledOut) {
  DeviceInventory inv;
  inv.cuda_visible_devices = "";
  inv.nvidia_driver_version = "580.65.06";
  inv.cuda_driver_version = "13.0";
  const std::string text = format_inventory(inv);
  EXPECT_NE(text.find("CUDA_VISIBLE_DEVICES    (set but empty: no GPUs visible)"), std::string::npos) << text;
  EXPECT_NE(text.find("NVIDIA driver           580.65.06 (runs CUDA up to 13.0)"), std::string::npos) << text;
}

TEST(Probe, RealProbeAgreesWithLibTorch) {
  const DeviceInventory inv = probe_devices(std::nullopt);
  EXPECT_EQ(inv.cuda_available, !inv.gpus.empty());
  EXPECT_GT(inv.cpu_threads, 0);
  if (!inv.cuda_available) {
    EXPECT_FALSE(inv.cuda_unavailable_reason.empty());
  }
}

}  // namespace
}  // namespace gputrain::device
