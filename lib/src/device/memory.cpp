#include "gputrain/device/memory.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace gputrain::device {

MemoryStats memory_stats(const torch::Device& device) {
  MemoryStats stats;
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) {
    using c10::CachingAllocator::StatType;
    const auto index = device.index();
    const auto raw = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    const auto all = static_cast<std::size_t>(StatType::AGGREGATE);
    stats.allocated = raw.allocated_bytes[all].current;
    stats.reserved = raw.reserved_bytes[all].current;
    stats.peak_allocated = raw.allocated_bytes[all].peak;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, index) == cudaSuccess) stats.total = static_cast<int64_t>(prop.totalGlobalMem);
  }
#else
  (void)device;
#endif
  return stats;
}

void reset_peak_memory(const torch::Device& device) {
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

}  // namespace gputrain::device
