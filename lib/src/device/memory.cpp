#include "gputrain/device/memory.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <fstream>
#include <sstream>
#include <string>

namespace gputrain::device {

MemoryStats memory_stats(const torch::Device& device) {
  MemoryStats stats;
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) {
    using c10::CachingAllocator::StatType;
    const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto raw = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    const auto all = static_cast<std::size_t>(StatType::AGGREGATE);
    stats.allocated = raw.allocated_bytes[all].current;
    stats.reserved = raw.reserved_bytes[all].current;
    stats.peak_allocated = raw.allocated_bytes[all].peak;
    stats.total = static_cast<int64_t>(at::cuda::getDeviceProperties(index)->totalGlobalMem);
  }
#else
  (void)device;
#endif
  return stats;
}

int64_t free_memory(const torch::Device& device) {
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : c10::cuda::current_device();
    // Through the caching allocator's interface, which asks the driver on
    // LibTorch's side; it opens a context on this device, the one the run uses.
    c10::DeviceAllocator* allocator = c10::cuda::CUDACachingAllocator::get();
    return static_cast<int64_t>(allocator->getMemoryInfo(index).first);
  }
#else
  (void)device;
#endif
  return -1;
}

int64_t host_available_memory(const std::string& meminfo) {
  std::ifstream in(meminfo);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

void set_current_device(const torch::Device& device) {
  if (device.is_cuda() && device.has_index()) c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

void reset_peak_memory(const torch::Device& device) {
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

void release_cached_memory(const torch::Device& device) {
#ifdef GPUTRAIN_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

}  // namespace gputrain::device
