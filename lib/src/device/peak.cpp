#include "gputrain/device/peak.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>

namespace gputrain::device {

namespace {

struct SheetRow {
  const char* name_part;  // the most specific names first: "H100 PCIe" before "H100"
  const char* label;
  double fp32, tf32, half;  // TFLOP/s, dense; half: bf16 and fp16 alike
};

// NVIDIA's data sheets, dense tensor-core figures (half the "with sparsity" ones).
constexpr std::array<SheetRow, 6> kSheet{{
    {"H200 NVL", "H200 NVL", 60.0, 417.5, 835.5},
    {"H100 PCIe", "H100 PCIe", 51.2, 378.0, 756.0},
    {"H100 NVL", "H100 NVL", 60.0, 417.5, 835.5},
    {"H200", "H200", 66.9, 494.7, 989.4},
    {"H100", "H100 SXM", 66.9, 494.7, 989.4},
    {"A100", "A100", 19.5, 156.0, 312.0},
}};

}  // namespace

const char* precision_name(MathPrecision precision) {
  switch (precision) {
    case MathPrecision::kFp32:
      return "float32";
    case MathPrecision::kTf32:
      return "TF32";
    case MathPrecision::kBf16:
      return "bf16";
    case MathPrecision::kFp16:
      return "fp16";
  }
  return "float32";
}

std::optional<PeakRate> gpu_peak(const std::string& gpu_name, MathPrecision precision) {
  for (const SheetRow& row : kSheet) {
    if (gpu_name.find(row.name_part) == std::string::npos) continue;
    const double tflops = precision == MathPrecision::kFp32   ? row.fp32
                          : precision == MathPrecision::kTf32 ? row.tf32
                                                              : row.half;
    return PeakRate{tflops, fmt::format("the {}'s dense {} peak (data sheet)", row.label, precision_name(precision))};
  }
  return std::nullopt;
}

PeakRate measure_cpu_peak(MathPrecision precision, double seconds) {
  constexpr int64_t kSide = 512;
  const at::NoGradGuard no_grad;
  // The run's number format: with bf16 autocast a CPU with AVX-512 BF16 or AMX multiplies several
  // times faster than in float32, and a share of the float32 rate would pass 100%.
  const at::ScalarType type = precision == MathPrecision::kBf16   ? at::kBFloat16
                              : precision == MathPrecision::kFp16 ? at::kHalf
                                                                  : at::kFloat;
  // Constant inputs: drawing random ones would move the global generator, and a run's
  // weights and dropout must not depend on whether this process measured already.
  const at::Tensor a = at::full({kSide, kSide}, 0.5, at::TensorOptions().dtype(type));
  const at::Tensor b = at::full({kSide, kSide}, 0.25, at::TensorOptions().dtype(type));
  at::Tensor c = at::mm(a, b);  // untimed: the first product allocates and starts the threads
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point from) {
    return std::chrono::duration<double>(Clock::now() - from).count();
  };
  // The best of a few windows: a window in which other work took a core (a
  // compile, the loader's first batches) would understate the peak, and the
  // run's share of it pass 100%.
  constexpr int kWindows = 4;
  double best = 0;
  for (int window = 0; window < kWindows; ++window) {
    const auto start = Clock::now();
    int64_t products = 0;
    double elapsed = 0;
    do {
      at::mm_out(c, a, b);
      ++products;
      elapsed = seconds_since(start);
    } while (elapsed < seconds / kWindows);
    best = std::max(best, 2.0 * kSide * kSide * kSide * static_cast<double>(products) / elapsed);
  }
  return PeakRate{best / 1e12,
                  fmt::format("{} {}x{} matrix products measured on {} thread{}", precision_name(precision), kSide,
                              kSide, at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s")};
}

std::optional<PeakRate> device_peak(const torch::Device& device, MathPrecision precision) {
  if (device.is_cpu()) {
    // Measured once per thread count and format: tests and sweeps build many runs in one process.
    static std::mutex mutex;
    static std::map<std::pair<int, MathPrecision>, PeakRate> measured;
    const std::lock_guard<std::mutex> lock(mutex);
    const std::pair<int, MathPrecision> key{at::get_num_threads(), precision};
    auto it = measured.find(key);
    if (it == measured.end()) it = measured.emplace(key, measure_cpu_peak(precision)).first;
    return it->second;
  }
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
    return gpu_peak(at::cuda::getDeviceProperties(index)->name, precision);
  }
#endif
  (void)precision;
  return std::nullopt;
}

}  // namespace gputrain::device
