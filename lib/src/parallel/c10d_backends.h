#pragma once
// The two process-group backends behind ddp, each built in its own .cpp:
// ProcessGroupGloo needs Gloo's headers and ProcessGroupNCCL the CUDA and
// NCCL ones, and neither set should reach the rest of the code.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <chrono>

namespace gputrain::parallel::detail {

struct BackendOptions {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};  // for setting up and for every collective
  bool loopback = false;                 // every rank on this machine: Gloo listens on 127.0.0.1
  c10::DeviceIndex cuda_device = 0;      // NCCL: this rank's GPU
};

// How long NCCL's watchdog waits past ddp.timeout_s before it ends the
// process: half the timeout, at least 30 s and at most 5 minutes.
inline std::chrono::milliseconds watchdog_margin(std::chrono::milliseconds timeout) {
  return std::clamp<std::chrono::milliseconds>(timeout / 2, std::chrono::seconds(30), std::chrono::minutes(5));
}

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const BackendOptions& options);
// Throws DistributedError when gputrain was built without NCCL's header.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendOptions& options);

}  // namespace gputrain::parallel::detail
