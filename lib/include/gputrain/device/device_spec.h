#pragma once
// The `device:` key parsed into what it asks for.
#include <optional>
#include <string>

namespace gputrain::device {

enum class DeviceKind { kAuto, kCpu, kCuda, kMps };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kAuto;
  std::optional<int64_t> index;  // cuda:N

  // "auto", "cpu", "cuda", "cuda:1", "mps"; throws UserError otherwise.
  static DeviceSpec parse(const std::string& text);
};

std::string to_string(DeviceKind kind);

}  // namespace gputrain::device
