#include "gputrain/device/inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "gputrain/common/strings.h"

namespace gputrain::device {

namespace {
bool is_valid_entry(const std::string& entry) {
  if (entry.empty()) return false;
  if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) return true;
  return std::all_of(entry.begin(), entry.end(), [](unsigned char c) { return std::isdigit(c); });
}
}  // namespace

std::vector<std::string> visible_physical_ids(const std::optional<std::string>& cuda_visible_devices,
                                              int64_t device_count) {
  std::vector<std::string> ids;
  if (!cuda_visible_devices) {
    for (int64_t i = 0; i < device_count; ++i) ids.push_back(std::to_string(i));
    return ids;
  }
  for (const auto& raw : split(*cuda_visible_devices, ',')) {
    const std::string entry(trim(raw));
    if (!is_valid_entry(entry)) break;  // CUDA ignores everything from the first invalid entry on
    ids.push_back(entry);
  }
  return ids;
}

std::string cuda_version_string(long encoded) {
  if (encoded <= 0) return "";
  return fmt::format("{}.{}", encoded / 1000, (encoded % 1000) / 10);
}

std::string explain_cuda_unavailable(const CudaStartFacts& facts) {
  if (facts.cuda_visible_devices && trim(*facts.cuda_visible_devices).empty()) {
    return "CUDA_VISIBLE_DEVICES is set but empty: no GPUs visible (unset it, or list the GPUs to use)";
  }
  const std::string built = cuda_version_string(facts.build_version);
  if (!facts.driver) {
    // NVML comes with the driver: without it, LibTorch's words only repeat that, unless they say something else.
    return facts.error.empty() || facts.error.find("NVIDIA driver") != std::string::npos
               ? "no NVIDIA driver was found on this machine"
               : fmt::format("CUDA could not start and NVML, which comes with the NVIDIA driver, is missing: {}",
                             facts.error);
  }
  const DriverInfo& driver = *facts.driver;
  if (driver.cuda_version > 0 && facts.build_version > 0 && driver.cuda_version < facts.build_version) {
    const std::string needed = facts.build_version >= 13000 && facts.build_version < 14000
                                   ? "an R580 driver or newer"
                                   : fmt::format("a driver that supports CUDA {}", built);
    return fmt::format(
        "the NVIDIA driver {} runs CUDA {} at most, but this LibTorch was built for CUDA {}, which "
        "needs {}: update the driver, or use a LibTorch built for CUDA {} or older",
        driver.version, cuda_version_string(driver.cuda_version), built, needed,
        cuda_version_string(driver.cuda_version));
  }
  return fmt::format("the NVIDIA driver {} is installed but CUDA could not start: {}", driver.version,
                     facts.error.empty() ? "no GPU was found" : facts.error);
}

}  // namespace gputrain::device
