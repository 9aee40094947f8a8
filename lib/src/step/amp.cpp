#include "gputrain/step/amp.h"

#include "gputrain/config/schema.h"

#include <ATen/autocast_mode.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>
#include <fmt/format.h>
#include <torch/optim/optimizer.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace gputrain::step {

namespace {

// The one place that knows LibTorch's autocast API. 2.4 made it take a device
// type; before, each device had its own functions (the CUDA ones unprefixed).
// Before 2.4 only CUDA and the CPU are handled; check_amp_device admits no other.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType device) { return at::autocast::is_autocast_enabled(device); }
void set_autocast_enabled(c10::DeviceType device, bool enabled) { at::autocast::set_autocast_enabled(device, enabled); }
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

// The names in GradScalerState, in the order state_dict() writes them.
constexpr std::array<std::string_view, 6> kStateKeys{"scale",           "growth_factor",  "backoff_factor",
                                                     "growth_interval", "growth_tracker", "skipped_steps"};

// Why `options` cannot drive a scaler, or "" when they can. The bounds are
// PyTorch's, plus a finite positive scale.
std::string options_problem(const GradScalerOptions& options) {
  if (!(std::isfinite(options.init_scale()) && options.init_scale() > 0)) {
    return fmt::format("scale must be finite and > 0 (got {})", options.init_scale());
  }
  if (!(options.growth_factor() > 1)) {
    return fmt::format("growth_factor must be > 1 (got {})", options.growth_factor());
  }
  if (!(options.backoff_factor() > 0 && options.backoff_factor() < 1)) {
    return fmt::format("backoff_factor must be in (0, 1) (got {})", options.backoff_factor());
  }
  if (options.growth_interval() < 1) {
    return fmt::format("growth_interval must be >= 1 (got {})", options.growth_interval());
  }
  return "";
}

// The per-device inf flags of an unscale, summed on `device`: > 0 when any gradient was inf or NaN.
at::Tensor summed_flags(const std::vector<at::Tensor>& found_inf, const c10::Device& device) {
  at::Tensor found = found_inf.front().to(device);
  for (std::size_t i = 1; i < found_inf.size(); ++i) found = found + found_inf[i].to(device);
  return found;
}

std::vector<at::Tensor> optimizer_parameters(const torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    parameters.insert(parameters.end(), group.params().begin(), group.params().end());
  }
  return parameters;
}

}  // namespace

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
    throw ConfigError(where, "train.amp", config::kFp16NeedsCuda);
  }
}

AutocastScope::AutocastScope(AmpMode mode, c10::DeviceType device_type, bool cache_casts)
    : active_(mode != AmpMode::kOff), device_type_(device_type) {
  if (!active_) return;
  check_amp_device(mode, device_type);
  previous_ = autocast_state(device_type);
  previous_cache_ = at::autocast::is_autocast_cache_enabled();
  if (!cache_casts) at::autocast::set_autocast_cache_enabled(false);
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
  at::autocast::set_autocast_cache_enabled(previous_cache_);
}

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  const std::string problem = options_problem(options_);
  GPUTRAIN_CHECK(problem.empty(), "GradScalerOptions: {}", problem);
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!enabled()) return loss;
  if (!scale_.defined()) {
    const auto on_device = at::TensorOptions().device(loss.device());
    scale_ = at::scalar_tensor(options_.init_scale(), on_device.dtype(at::kFloat));
    growth_tracker_ = at::scalar_tensor(init_growth_tracker_, on_device.dtype(at::kInt));
  }
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) { unscale_(optimizer_parameters(optimizer)); }

void GradScaler::unscale_(const std::vector<at::Tensor>& parameters) {
  if (!enabled()) return;
  GPUTRAIN_CHECK(stage_ == Stage::kReady, "GradScaler::unscale_ called twice, or after step(), since update()");
  GPUTRAIN_CHECK(scale_.defined(), "GradScaler::unscale_ before scale(): no loss was scaled");
  at::NoGradGuard no_grad;

  // The fused kernel wants one device and dtype per call.
  struct Group {
    c10::Device device;
    c10::ScalarType dtype;
    std::vector<at::Tensor> grads;
  };
  std::vector<Group> groups;
  for (const at::Tensor& parameter : parameters) {
    at::Tensor grad = parameter.grad();
    if (!grad.defined()) continue;
    GPUTRAIN_CHECK(grad.scalar_type() != at::kHalf,
                   "cannot unscale float16 gradients: keep parameters in float32 and let autocast lower precision");
    if (grad.is_sparse()) grad = grad._values();  // unscaling is element-wise, so the values are enough
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.device == grad.device() && g.dtype == grad.scalar_type(); });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{grad.device(), grad.scalar_type(), {}});
    it->grads.push_back(grad);
  }

  // One inf flag per device, shared by its dtypes; update() adds them up. The
  // reciprocal is taken in double, as PyTorch does, so a power of two stays exact.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  std::vector<at::Tensor> found_inf;
  std::vector<at::Tensor> inv_scales;  // parallel to found_inf
  for (Group& group : groups) {
    auto it = std::find_if(found_inf.begin(), found_inf.end(),
                           [&](const at::Tensor& f) { return f.device() == group.device; });
    if (it == found_inf.end()) {
      inv_scales.push_back(inv_scale.to(group.device));
      it = found_inf.insert(found_inf.end(), at::zeros({}, inv_scales.back().options()));
    }
    const auto index = static_cast<std::size_t>(it - found_inf.begin());
    at::_amp_foreach_non_finite_check_and_unscale_(group.grads, *it, inv_scales[index]);
  }
  found_inf_ = std::move(found_inf);
  stage_ = Stage::kUnscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!enabled()) {
    optimizer.step();
    return true;
  }
  GPUTRAIN_CHECK(stage_ != Stage::kStepped, "GradScaler::step called twice since update()");
  if (stage_ == Stage::kReady) unscale_(optimizer);
  stage_ = Stage::kStepped;
  const bool finite = std::all_of(found_inf_.begin(), found_inf_.end(),
                                  [](const at::Tensor& found) { return found.item<float>() == 0.0f; });
  if (!finite) {
    ++skipped_steps_;
    return false;
  }
  optimizer.step();
  return true;
}

at::Tensor GradScaler::unscale_for_fused_step(const std::vector<at::Tensor>& parameters) {
  GPUTRAIN_CHECK(enabled(), "GradScaler::unscale_for_fused_step on a disabled scaler");
  GPUTRAIN_CHECK(stage_ != Stage::kStepped, "GradScaler::unscale_for_fused_step called twice since update()");
  if (stage_ == Stage::kReady) unscale_(parameters);
  stage_ = Stage::kStepped;
  const at::Tensor found = summed_flags(found_inf_, scale_.device()).clamp_max(1);  // one flag for the optimizer
  if (!skipped_on_device_.defined()) skipped_on_device_ = at::zeros({}, scale_.options().dtype(at::kLong));
  skipped_on_device_.add_(found.to(at::kLong));
  return found;
}

int64_t GradScaler::skipped_steps() const {
  return skipped_steps_ + (skipped_on_device_.defined() ? skipped_on_device_.item<int64_t>() : 0);
}

void GradScaler::update() {
  if (!enabled()) return;
  GPUTRAIN_CHECK(!found_inf_.empty(), "GradScaler::update without an inf check: call step() or unscale_() first");
  at::_amp_update_scale_(scale_, growth_tracker_, summed_flags(found_inf_, scale_.device()), options_.growth_factor(),
                         options_.backoff_factor(), options_.growth_interval());
  found_inf_.clear();
  stage_ = Stage::kReady;
}

double GradScaler::scale() const {
  if (!enabled()) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale();
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

GradScalerState GradScaler::state_dict() const {
  if (!enabled()) return {};
  const std::array<double, kStateKeys.size()> values{scale(),
                                                     options_.growth_factor(),
                                                     options_.backoff_factor(),
                                                     static_cast<double>(options_.growth_interval()),
                                                     static_cast<double>(growth_tracker()),
                                                     static_cast<double>(skipped_steps())};
  GradScalerState state;
  for (std::size_t i = 0; i < kStateKeys.size(); ++i) state.emplace(kStateKeys[i], values[i]);
  return state;
}

void GradScaler::load_state_dict(const GradScalerState& state) {
  if (!enabled()) return;
  if (state.empty()) {
    throw CheckpointError("the checkpoint has no loss-scaler state: it was saved without fp16 loss scaling");
  }
  for (const auto& entry : state) {
    if (std::find(kStateKeys.begin(), kStateKeys.end(), entry.first) == kStateKeys.end()) {
      throw CheckpointError(fmt::format("unknown loss-scaler state entry '{}'", entry.first));
    }
  }
  const auto value = [&](std::string_view key) {
    const auto it = state.find(std::string(key));
    if (it == state.end()) throw CheckpointError(fmt::format("the loss-scaler state lacks '{}'", key));
    return it->second;
  };
  const auto count = [&](std::string_view key) {
    const double v = value(key);
    if (!(v >= 0 && v <= 9007199254740992.0 && std::floor(v) == v)) {  // 2^53: still exact in a double
      throw CheckpointError(fmt::format("loss-scaler state '{}' must be a whole number >= 0 (got {})", key, v));
    }
    return static_cast<int64_t>(v);
  };

  // Everything is read and checked before anything changes.
  GradScalerOptions loaded = options_;
  loaded.init_scale(value("scale"))
      .growth_factor(value("growth_factor"))
      .backoff_factor(value("backoff_factor"))
      .growth_interval(count("growth_interval"));
  if (const std::string problem = options_problem(loaded); !problem.empty()) {
    throw CheckpointError("loss-scaler state: " + problem);
  }
  const int64_t growth_tracker = count("growth_tracker");
  const int64_t skipped_steps = count("skipped_steps");
  options_ = loaded;
  init_growth_tracker_ = growth_tracker;
  skipped_steps_ = skipped_steps;
  if (skipped_on_device_.defined()) skipped_on_device_.zero_();  // in place: a captured step adds to it
  if (scale_.defined()) {
    scale_.fill_(options_.init_scale());
    growth_tracker_.fill_(init_growth_tracker_);
  }
}

}  // namespace gputrain::step
