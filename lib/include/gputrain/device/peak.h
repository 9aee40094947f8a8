#pragma once
// The arithmetic rate a run's achieved TFLOP/s is a share of: the data sheet's
// dense peak for the GPUs it knows, at the run's precision, and on the CPU a
// matrix product in the run's format measured with the run's threads.
#include <torch/types.h>

#include <optional>
#include <string>

namespace gputrain::device {

// The number format the run's matrix products and convolutions use.
enum class MathPrecision { kFp32, kTf32, kBf16, kFp16 };

const char* precision_name(MathPrecision precision);

struct PeakRate {
  double tflops = 0;   // per device
  std::string source;  // what the figure is, for the log
};

// Dense (not 2:4 sparse) peaks from NVIDIA's data sheets, matched on the name
// CUDA gives the device ("NVIDIA H100 80GB HBM3"); unset for a GPU not listed.
std::optional<PeakRate> gpu_peak(const std::string& gpu_name, MathPrecision precision);

// Matrix products of 512 x 512 in `precision`'s format (bfloat16, half, else
// float32) on LibTorch's current intra-op threads, repeated for about
// `seconds` after one untimed product: the best rate of a few windows.
PeakRate measure_cpu_peak(MathPrecision precision, double seconds = 0.08);

// `device`'s peak at `precision`: gpu_peak of its name on CUDA, the CPU's
// measured rate in that format (once per thread count, format and process) on
// the CPU; unset for another device or a GPU not listed.
std::optional<PeakRate> device_peak(const torch::Device& device, MathPrecision precision);

}  // namespace gputrain::device
