#pragma once
// CUDA memory of one device as LibTorch's caching allocator sees it, and the
// host's available memory.
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace gputrain::device {

struct MemoryStats {
  int64_t allocated = 0;       // bytes held by live tensors
  int64_t reserved = 0;        // bytes the caching allocator holds
  int64_t peak_allocated = 0;  // since the last reset_peak_memory
  int64_t total = 0;           // the device's memory
};

// All zero off CUDA.
MemoryStats memory_stats(const torch::Device& device);
// Bytes the driver has free on a CUDA `device` (the one the run uses: this
// opens its context); -1 off CUDA.
int64_t free_memory(const torch::Device& device);
void reset_peak_memory(const torch::Device& device);
// Gives the blocks the caching allocator holds unused back to the driver
// (after running out of memory, so the next try starts clean); nothing off CUDA.
void release_cached_memory(const torch::Device& device);
// Bytes the kernel can give this process without swapping (MemAvailable in
// /proc/meminfo, or the file the tests name); -1 when it cannot tell.
int64_t host_available_memory(const std::string& meminfo = "/proc/meminfo");
// Makes a CUDA `device` this thread's current one, so that whatever LibTorch
// allocates without naming a device (pinned host memory, handles) lands on
// the GPU the run uses and opens no context on GPU 0. Nothing off CUDA.
void set_current_device(const torch::Device& device);

}  // namespace gputrain::device
