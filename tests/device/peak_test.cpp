#include "gputrain/device/peak.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace gputrain::device {
namespace {

TEST(GpuPeak, DenseDataSheetFiguresByNameAndPrecision) {
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 80GB HBM3", MathPrecision::kBf16)->tflops, 989.4);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 80GB HBM3", MathPrecision::kTf32)->tflops, 494.7);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H200", MathPrecision::kFp16)->tflops, 989.4);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H200", MathPrecision::kFp32)->tflops, 66.9);
  // A longer name that holds a shorter one is matched first: the PCIe and NVL parts are slower.
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H100 PCIe", MathPrecision::kBf16)->tflops, 756.0);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA H200 NVL", MathPrecision::kBf16)->tflops, 835.5);
  EXPECT_DOUBLE_EQ(gpu_peak("NVIDIA A100-SXM4-80GB", MathPrecision::kTf32)->tflops, 156.0);
  EXPECT_EQ(gpu_peak("NVIDIA H200", MathPrecision::kBf16)->source, "the H200's dense bf16 peak (data sheet)");
  EXPECT_FALSE(gpu_peak("NVIDIA GeForce RTX 4090", MathPrecision::kBf16)) << "no share for a GPU not listed";
}

TEST(CpuPeak, IsMeasuredWithTheCurrentThreads) {
  const PeakRate measured = measure_cpu_peak(MathPrecision::kFp32, 0.005);
  EXPECT_GT(measured.tflops, 0);
  EXPECT_NE(measured.source.find(std::to_string(at::get_num_threads()) + " thread"), std::string::npos)
      << measured.source;
  EXPECT_NE(measured.source.find("float32 "), std::string::npos) << measured.source;
  // In the run's format: a bf16 run's share is of the bf16 rate, which AVX-512 BF16 or AMX make several times
  // the float32 one.
  const std::optional<PeakRate> cpu = device_peak(torch::Device(torch::kCPU), MathPrecision::kBf16);
  ASSERT_TRUE(cpu);
  EXPECT_NE(cpu->source.find("bf16 "), std::string::npos) << cpu->source;
}

}  // namespace
}  // namespace gputrain::device
