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
  nccl->timeout = options.timeout;  // enforced by ProcessGroupNCCL's watchdog, which ends the process
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
