#include "gputrain/device/device_spec.h"

#include <fmt/format.h>

#include <charconv>

#include "gputrain/common/error.h"

namespace gputrain::device {

DeviceSpec DeviceSpec::parse(const std::string& text) {
  if (text == "auto") return {DeviceKind::kAuto, std::nullopt};
  if (text == "cpu") return {DeviceKind::kCpu, std::nullopt};
  if (text == "mps") return {DeviceKind::kMps, std::nullopt};
  if (text == "cuda") return {DeviceKind::kCuda, std::nullopt};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    int64_t index = -1;
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    const auto [end, error] = std::from_chars(first, last, index);
    if (error == std::errc() && end == last && index >= 0) return {DeviceKind::kCuda, index};
  }
  throw UserError(fmt::format("unknown device '{}'; allowed: auto, cpu, cuda, cuda:N or mps", text));
}

std::string to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kAuto:
      return "auto";
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kMps:
      return "mps";
  }
  return "unknown";
}

}  // namespace gputrain::device
