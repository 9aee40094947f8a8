#include "gputrain/train/amp.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <utility>

namespace gputrain::train {

namespace {

// The one place that knows LibTorch's autocast API. 2.4 made it take a device
// type; before, each device had its own functions (the CUDA ones unprefixed).
// Before 2.4 only CUDA and the CPU are handled; check_amp_device admits no other.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
c10::ScalarType autocast_dtype(c10::DeviceType device) { return at::autocast::get_autocast_dtype(device); }
void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
bool autocast_enabled(c10::DeviceType device) {
  return device == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast_enabled(c10::DeviceType device, bool enabled) {
  if (device == c10::kCUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
}
c10::ScalarType autocast_dtype(c10::DeviceType device) {
  return device == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

constexpr std::array<std::pair<AmpMode, std::string_view>, 3> kAmpWords{{
    {AmpMode::kOff, "off"},
    {AmpMode::kFp16, "fp16"},
    {AmpMode::kBf16, "bf16"},
}};

}  // namespace

AmpMode parse_amp_mode(std::string_view word) {
  const auto* it = std::find_if(kAmpWords.begin(), kAmpWords.end(), [&](const auto& w) { return w.second == word; });
  GPUTRAIN_CHECK(it != kAmpWords.end(), "train.amp '{}' was not validated by the config loader", word);
  return it->first;
}

std::string_view to_string(AmpMode mode) {
  const auto* it = std::find_if(kAmpWords.begin(), kAmpWords.end(), [&](const auto& w) { return w.first == mode; });
  GPUTRAIN_CHECK(it != kAmpWords.end(), "AmpMode {} has no name", static_cast<int>(mode));
  return it->second;
}

AutocastState autocast_state(c10::DeviceType device_type) {
  return {autocast_enabled(device_type), autocast_dtype(device_type)};
}

void check_amp_device(AmpMode mode, c10::DeviceType device_type, const SourceMark& where) {
  if (mode == AmpMode::kOff || device_type == c10::kCUDA) return;
  if (device_type != c10::kCPU) {
    throw ConfigError(where, "train.amp",
                      fmt::format("autocast runs on cuda or cpu, not {}; use train.amp: off",
                                  c10::DeviceTypeName(device_type, /*lower_case=*/true)));
  }
  if (mode == AmpMode::kFp16) {
    throw ConfigError(where, "train.amp", "fp16 autocast needs CUDA; on CPU use bf16 (train.amp: bf16)");
  }
}

AutocastScope::AutocastScope(AmpMode mode, c10::DeviceType device_type)
    : active_(mode != AmpMode::kOff), device_type_(device_type) {
  if (!active_) return;
  check_amp_device(mode, device_type);
  previous_ = autocast_state(device_type);
  set_autocast_enabled(device_type, true);
  set_autocast_dtype(device_type, mode == AmpMode::kFp16 ? c10::kHalf : c10::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // Weights cast inside a scope are cached until the outermost one closes, as
  // torch.autocast does; keeping them longer would hold stale copies.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_type_, previous_.enabled);
  set_autocast_dtype(device_type_, previous_.dtype);
}

}  // namespace gputrain::train
