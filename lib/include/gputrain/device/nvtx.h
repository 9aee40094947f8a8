#pragma once
// A named range on the Nsight Systems timeline (NVTX), so that a profile of
// a run reads as data / forward / backward / optimizer. NVTX3 is header-only:
// with no profiler attached a range costs a check of a null pointer, and a
// build without CUDA compiles it to nothing.
namespace gputrain::device {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name);  // `name` is copied by the profiler
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace gputrain::device
