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

}  // namespace gputrain::device
