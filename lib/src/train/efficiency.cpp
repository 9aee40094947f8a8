#include "gputrain/train/efficiency.h"

#include <fmt/format.h>

namespace gputrain::train {

std::optional<double> Efficiency::peak_share(double samples_per_s) const {
  if (!peak || peak->tflops <= 0 || train_flops_per_sample <= 0) return std::nullopt;
  return tflops(samples_per_s) / (peak->tflops * static_cast<double>(devices));
}

std::string Efficiency::describe() const {
  const std::string work =
      fmt::format("a training sample is {:.4g} M FLOPs (3 x the traced forward pass)", train_flops_per_sample / 1e6);
  if (!peak) return work + "; no peak is known for this device, so epochs report TFLOP/s without a share";
  return fmt::format("{}; epochs report TFLOP/s as a share of {:.4g} TFLOP/s{}: {}", work, peak->tflops,
                     devices > 1 ? fmt::format(" on each of {} devices", devices) : "", peak->source);
}

device::MathPrecision math_precision(config::AmpMode amp, const std::string& matmul_precision,
                                     const torch::Device& device) {
  using device::MathPrecision;
  if (amp == config::AmpMode::kBf16) return MathPrecision::kBf16;
  if (amp == config::AmpMode::kFp16) return MathPrecision::kFp16;
  if (!device.is_cuda() || matmul_precision == "highest") return MathPrecision::kFp32;
  return matmul_precision == "medium" ? MathPrecision::kBf16 : MathPrecision::kTf32;
}

Efficiency run_efficiency(int64_t forward_macs_per_sample, const torch::Device& device, device::MathPrecision precision,
                          int64_t devices) {
  Efficiency e;
  e.train_flops_per_sample = 3.0 * 2.0 * static_cast<double>(forward_macs_per_sample);
  e.peak = device::device_peak(device, precision);
  e.devices = devices;
  return e;
}

}  // namespace gputrain::train
