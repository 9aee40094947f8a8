#pragma once
// Hardware efficiency: the arithmetic a run's training does each second, and
// its share of the peak of the devices it runs on.
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/device/peak.h"

namespace gputrain::train {

struct Efficiency {
  // 3 x (2 x the traced forward multiply-adds): the forward pass, and the
  // backward pass's two products of the same size. 0: unknown, nothing reported.
  double train_flops_per_sample = 0;
  std::optional<device::PeakRate> peak;  // per device; unset where none is known
  int64_t devices = 1;                   // training devices: the peak counts each

  double tflops(double samples_per_s) const { return train_flops_per_sample * samples_per_s / 1e12; }
  std::optional<double> peak_share(double samples_per_s) const;
  // The run-start line: the work of a sample and the peak it is compared with.
  std::string describe() const;
};

// The format a run's products use: its autocast; else on CUDA TF32 (cuDNN's
// convolutions use it, and matmuls at matmul_precision "high"), float32 at
// "highest", bf16 at "medium"; float32 elsewhere.
device::MathPrecision math_precision(config::AmpMode amp, const std::string& matmul_precision,
                                     const torch::Device& device);

// `forward_macs_per_sample`: the traced model's (plan::RunFacts). Measures the
// CPU's peak when `device` is the CPU (device::device_peak).
Efficiency run_efficiency(int64_t forward_macs_per_sample, const torch::Device& device, device::MathPrecision precision,
                          int64_t devices);

}  // namespace gputrain::train
