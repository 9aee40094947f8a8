#pragma once
// Mixed precision: the train.amp mode and an autocast scope. Every call into
// LibTorch's autocast API is in amp.cpp, because that API changed between
// releases (device-type functions since 2.4, per-device ones before).
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string_view>

#include "gputrain/common/error.h"

namespace gputrain::train {

// train.amp: off | fp16 | bf16.
enum class AmpMode { kOff, kFp16, kBf16 };

// The config word, already checked by config::load; any other word is an
// InternalError.
AmpMode parse_amp_mode(std::string_view word);
std::string_view to_string(AmpMode mode);

// Throws a ConfigError on train.amp (at `where`) when `mode` cannot run on
// `device_type`: fp16 needs CUDA, bf16 needs CUDA or the CPU, off runs anywhere.
// The loader rejects `device: cpu` with fp16; this covers devices resolved
// later, such as `device: auto` on a machine without a GPU.
void check_amp_device(AmpMode mode, c10::DeviceType device_type, const SourceMark& where = {});

// A device type's autocast settings on the calling thread.
struct AutocastState {
  bool enabled = false;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};
AutocastState autocast_state(c10::DeviceType device_type);

// Autocast for one device type while alive, like `with torch.autocast(...)`:
// fp16 runs autocast to float16, bf16 to bfloat16, off leaves the thread's
// state alone. The destructor restores that device type's previous enabled flag
// and dtype, and the outermost scope clears the cache of casted weights.
// Autocast state is thread-local: every thread that runs a forward pass (each
// replica thread of data-parallel, for one) must open its own scope.
// Throws like check_amp_device for a mode the device type cannot run.
class AutocastScope {
 public:
  AutocastScope(AmpMode mode, c10::DeviceType device_type);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_;
  c10::DeviceType device_type_;
  AutocastState previous_;
};

}  // namespace gputrain::train
