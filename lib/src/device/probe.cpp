#include "gputrain/device/probe.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>

#include <thread>

#ifdef GPUTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/nccl.h>
#endif

namespace gputrain::device {

#ifdef GPUTRAIN_WITH_CUDA
namespace {

void probe_cuda(DeviceInventory& inventory) {
  inventory.torch_built_with_cuda = true;
  inventory.cuda_build_version = cuda_version_string(CUDART_VERSION);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) inventory.cuda_driver_version = cuda_version_string(driver);
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) inventory.cuda_runtime_version = cuda_version_string(runtime);
  const std::uint64_t nccl = torch::cuda::nccl::version();
  if (nccl != 0) {
    inventory.nccl_version = fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  }
  const auto& hooks = at::detail::getCUDAHooks();
  if (hooks.hasCuDNN()) {
    const long cudnn = hooks.versionCuDNN();
    inventory.cudnn_version = fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
  }

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (driver == 0) {
    inventory.cuda_unavailable_reason = "no NVIDIA driver was found on this machine";
    (void)cudaGetLastError();
    return;
  }
  if (status != cudaSuccess) {
    inventory.cuda_unavailable_reason = fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
    (void)cudaGetLastError();  // clear the sticky error for later callers
    return;
  }
  if (count == 0) {
    inventory.cuda_unavailable_reason =
        inventory.cuda_visible_devices
            ? fmt::format("no GPU is visible with CUDA_VISIBLE_DEVICES='{}'", *inventory.cuda_visible_devices)
            : "the CUDA driver reports no GPU";
    return;
  }
  inventory.cuda_available = true;
  inventory.cudnn_available = hooks.hasCuDNN();
  const std::vector<std::string> physical = visible_physical_ids(inventory.cuda_visible_devices, count);
  int previous = 0;
  (void)cudaGetDevice(&previous);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    GpuInfo gpu;
    gpu.logical_index = i;
    gpu.physical_id = i < static_cast<int>(physical.size()) ? physical[i] : std::to_string(i);
    gpu.name = prop.name;
    gpu.pci_bus_id = fmt::format("{:08x}:{:02x}:{:02x}.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    gpu.compute_major = prop.major;
    gpu.compute_minor = prop.minor;
    gpu.multiprocessors = prop.multiProcessorCount;
    gpu.total_memory = static_cast<int64_t>(prop.totalGlobalMem);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      gpu.free_memory = static_cast<int64_t>(free_bytes);
    }
    inventory.gpus.push_back(gpu);
  }
  (void)cudaSetDevice(previous);
}

}  // namespace
#endif

DeviceInventory probe_devices(const std::optional<std::string>& cuda_visible_devices) {
  DeviceInventory inventory;
  inventory.cuda_visible_devices = cuda_visible_devices;
  inventory.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  inventory.torch_intra_threads = at::get_num_threads();
  inventory.mps_available = at::hasMPS();
#ifdef GPUTRAIN_WITH_CUDA
  probe_cuda(inventory);
#else
  inventory.cuda_unavailable_reason = "this LibTorch was built without CUDA";
#endif
  return inventory;
}

}  // namespace gputrain::device
