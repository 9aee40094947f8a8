#pragma once
// The arithmetic rate a run's achieved TFLOP/s is a share of: the data sheet's
// dense peak for the GPUs it knows, at the run's precision, and on the CPU a
// float32 matrix product measured with the run's threads.
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

// float32 matrix products of 512 x 512 on LibTorch's current intra-op
// threads, repeated for about `seconds` after one untimed product.
PeakRate measure_cpu_peak(double seconds = 0.03);

// `device`'s peak at `precision`: gpu_peak of its name on CUDA, the CPU's
// measured float32 rate (once per thread count and process) on the CPU;
// unset for another device or a GPU not listed.
std::optional<PeakRate> device_peak(const torch::Device& device, MathPrecision precision);

}  // namespace gputrain::device
