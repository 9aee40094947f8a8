#include "gputrain/device/nvtx.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace gputrain::device {

#ifdef GPUTRAIN_WITH_CUDA
NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;
#endif

}  // namespace gputrain::device
