// Gloo's own headers are not in the torch wheel; Debian's libgloo-dev
// provides them. ProcessGroupGloo holds Gloo objects only through pointers, so
// its layout does not depend on the Gloo version those headers describe, and
// every function called here is LibTorch's own.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "c10d_backends.h"

namespace gputrain::parallel::detail {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const BackendOptions& options) {
  auto gloo = c10d::ProcessGroupGloo::Options::create(options.timeout);
  // Off one machine, the address this host's name resolves to, as
  // torch.distributed does when GLOO_SOCKET_IFNAME is unset.
  gloo->devices.push_back(options.loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                           : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(options.store, options.rank, options.size, gloo);
}

}  // namespace gputrain::parallel::detail
