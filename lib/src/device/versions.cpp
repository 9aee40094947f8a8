#include "gputrain/device/versions.h"

#include <fmt/format.h>
#include <torch/version.h>

#include "gputrain/device/inventory.h"

#include <ATen/detail/CUDAHooksInterface.h>

namespace gputrain::device {

std::string version() { return GPUTRAIN_VERSION; }

std::string torch_version() { return TORCH_VERSION; }

std::string version_line() {
#ifdef GPUTRAIN_WITH_CUDA
  const std::string cuda = "CUDA " + cuda_version_string(at::detail::getCUDAHooks().versionCUDART());
#else
  const std::string cuda = "CPU only";
#endif
  return fmt::format("gputrain {} (LibTorch {}, {})", version(), torch_version(), cuda);
}

}  // namespace gputrain::device
