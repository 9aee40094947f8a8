#pragma once
// Mixed precision: the train.amp mode, an autocast scope, and a loss scaler
// with torch.amp.GradScaler's semantics. Every call into
// LibTorch's autocast API is in amp.cpp, because that API changed between
// releases (device-type functions since 2.4, per-device ones before).
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/arg.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/config.h"

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace gputrain::step {

using AmpMode = config::AmpMode;

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
// `cache_casts` false turns autocast's cache of casted weights off while the
// scope lives, as a CUDA graph's warm-up and capture need (torch.cuda's
// make_graphed_callables does the same): a cached copy made outside the
// capture would be read by every replay, stale after the first update.
class AutocastScope {
 public:
  AutocastScope(AmpMode mode, c10::DeviceType device_type, bool cache_casts = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_;
  c10::DeviceType device_type_;
  AutocastState previous_;
  bool previous_cache_ = true;  // autocast's cache flag before the scope
};

// torch.amp.GradScaler's defaults. Enable it for fp16 only: bf16 has float32's
// exponent range, so its gradients do not underflow.
struct GradScalerOptions {
  TORCH_ARG(double, init_scale) = 65536.0;
  TORCH_ARG(double, growth_factor) = 2.0;   // > 1
  TORCH_ARG(double, backoff_factor) = 0.5;  // in (0, 1)
  TORCH_ARG(int64_t, growth_interval) = 2000;
  TORCH_ARG(bool, enabled) = true;
};

// What a checkpoint stores for the scaler: numbers by name, the names being
// scale, growth_factor, backoff_factor, growth_interval, growth_tracker and
// skipped_steps (counts are whole numbers, exact in a double). A disabled
// scaler's state is empty, as in PyTorch.
using GradScalerState = std::map<std::string, double>;

// Dynamic loss scaling, torch.amp.GradScaler's semantics, for one optimizer:
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);               // only when clipping
//   clip_grad_norm(parameters, max_norm);
//   scaler.step(optimizer);                   // skipped if a gradient is inf/NaN
//   scaler.update();                          // back off or grow the scale
// The scale and growth tracker are tensors on the loss's device, so a step
// adds no host sync except step()'s inf check. A disabled scaler passes
// everything through: scale() returns the loss, step() always steps.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  bool enabled() const { return options_.enabled(); }

  // loss * scale; the scale tensor is created on the loss's device on first use.
  at::Tensor scale(const at::Tensor& loss);

  // Divides the gradients by the scale in place, with LibTorch's fused kernel
  // per device and dtype, and records whether any was inf or NaN. At most once
  // between updates, and before step(). Gradients must not be float16.
  void unscale_(torch::optim::Optimizer& optimizer);
  void unscale_(const std::vector<at::Tensor>& parameters);

  // Unscales unless unscale_ already ran, then calls optimizer.step() only if
  // every gradient is finite. Returns whether it stepped. Waits for the device.
  bool step(torch::optim::Optimizer& optimizer);

  // The device half of step() for an optimizer that skips an update on a
  // flag itself (the fused kernels' found_inf): unscales unless unscale_
  // already ran, counts the step as skipped on the device when a gradient is
  // inf or NaN, and returns that flag, a float32 scalar on the scale's device
  // (1: make no update), for the optimizer. No host read, so a CUDA graph
  // captures it with the step; skipped_steps() reads the count. update() follows.
  at::Tensor unscale_for_fused_step(const std::vector<at::Tensor>& parameters);

  // After step(): multiplies the scale by backoff_factor if a gradient was
  // non-finite, by growth_factor after growth_interval finite steps in a row.
  void update();

  // The current scale (1 when disabled); reads the device.
  double scale() const;
  // Finite steps in a row since the scale last changed.
  int64_t growth_tracker() const;
  // Steps skipped for non-finite gradients, by step() and by
  // unscale_for_fused_step() (then it reads the device).
  int64_t skipped_steps() const;

  GradScalerState state_dict() const;
  // Throws CheckpointError for a missing, unknown or invalid entry, or an empty
  // state (saved while disabled). A disabled scaler ignores the state.
  void load_state_dict(const GradScalerState& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };

  // options_.init_scale and init_growth_tracker_ seed the tensors when scale()
  // creates them; load_state_dict sets both, as PyTorch's does.
  GradScalerOptions options_;
  int64_t init_growth_tracker_ = 0;
  at::Tensor scale_;                   // float32, 0-dim
  at::Tensor growth_tracker_;          // int32, 0-dim
  std::vector<at::Tensor> found_inf_;  // one float32 flag per gradient device
  Stage stage_ = Stage::kReady;
  int64_t skipped_steps_ = 0;     // by step(), on the host
  at::Tensor skipped_on_device_;  // int64, 0-dim: by unscale_for_fused_step()
};

}  // namespace gputrain::step
