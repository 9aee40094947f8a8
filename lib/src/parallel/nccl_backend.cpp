#include "c10d_backends.h"

#if GPUTRAIN_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#else
#include "gputrain/common/error.h"
#endif

namespace gputrain::parallel::detail {

#if GPUTRAIN_WITH_NCCL
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendOptions& options) {
  // NCCL binds each communicator to the current device.
  c10::cuda::set_device(options.cuda_device);
  auto nccl = c10d::ProcessGroupNCCL::Options::create();
  // ProcessGroupNCCL's watchdog ends the process (SIGABRT) when a collective
  // outlives its timeout. gputrain's own host waits end at ddp.timeout_s and
  // turn into a DistributedError naming the missing rank, so the watchdog
  // gets a margin past them and stays the last resort for a collective
  // nobody waits on.
  nccl->timeout = options.timeout + watchdog_margin(options.timeout);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(options.store, options.rank, options.size, nccl);
}
#else
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendOptions&) {
  throw DistributedError(
      "this gputrain was built without NCCL (nccl.h was not found when it was configured); use ddp.backend: gloo, "
      "or install the nvidia-nccl wheel beside torch and rebuild");
}
#endif

}  // namespace gputrain::parallel::detail
