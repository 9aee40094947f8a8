#pragma once
// CUDA memory of one device as LibTorch's caching allocator sees it.
#include <torch/types.h>

#include <cstdint>

namespace gputrain::device {

struct MemoryStats {
  int64_t allocated = 0;       // bytes held by live tensors
  int64_t reserved = 0;        // bytes the caching allocator holds
  int64_t peak_allocated = 0;  // since the last reset_peak_memory
  int64_t total = 0;           // the device's memory
};

// All zero off CUDA.
MemoryStats memory_stats(const torch::Device& device);
void reset_peak_memory(const torch::Device& device);

}  // namespace gputrain::device
