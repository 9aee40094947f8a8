#include "gputrain/device/probe.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>

#include <thread>

#ifdef GPUTRAIN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/cuda/nccl.h>
#endif

#include "gputrain/common/strings.h"
#include "gputrain/device/nvml.h"

namespace gputrain::device {

#ifdef GPUTRAIN_WITH_CUDA
namespace {

// Everything here goes through LibTorch (c10::cuda, at::cuda) and NVML, never
// the CUDA runtime directly, and nothing creates a CUDA context: properties
// and counts need none, and free memory comes from NVML. A run then holds a
// context on the devices it trains on only.
void probe_cuda(DeviceInventory& inventory, const std::string& nvml_library) {
  inventory.torch_built_with_cuda = true;
  const auto& hooks = at::detail::getCUDAHooks();
  const long built = hooks.versionCUDART();
  inventory.cuda_build_version = cuda_version_string(built);
  NvmlLibrary nvml(nvml_library);
  const std::optional<DriverInfo> driver = read_driver(nvml);
  if (driver) {
    inventory.nvidia_driver_version = driver->version;
    inventory.cuda_driver_version = cuda_version_string(driver->cuda_version);
  }
  const std::uint64_t nccl = torch::cuda::nccl::version();
  if (nccl != 0) {
    inventory.nccl_version = fmt::format("{}.{}.{}", nccl >> 32, (nccl >> 16) & 0xffff, nccl & 0xffff);
  }
  if (hooks.hasCuDNN()) {
    const long cudnn = hooks.versionCuDNN();
    inventory.cudnn_version = fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
  }
  CudaStartFacts facts{inventory.cuda_visible_devices, driver, built, ""};
  if (facts.cuda_visible_devices && trim(*facts.cuda_visible_devices).empty()) {
    inventory.cuda_unavailable_reason = explain_cuda_unavailable(facts);
    return;
  }
  int64_t count = 0;
  try {
    count = c10::cuda::device_count_ensure_non_zero();
  } catch (const c10::Error& e) {
    const std::string text = e.what_without_backtrace();
    facts.error = text.substr(0, text.find('\n'));
  }
  if (count == 0) {
    inventory.cuda_unavailable_reason = explain_cuda_unavailable(facts);
    return;
  }
  inventory.cuda_available = true;
  inventory.cudnn_available = hooks.hasCuDNN();
  const std::vector<std::string> physical = visible_physical_ids(inventory.cuda_visible_devices, count);
  for (int64_t i = 0; i < count; ++i) {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    GpuInfo gpu;
    gpu.logical_index = i;
    gpu.physical_id = i < static_cast<int64_t>(physical.size()) ? physical[i] : std::to_string(i);
    gpu.name = prop->name;
    gpu.pci_bus_id = fmt::format("{:08x}:{:02x}:{:02x}.0", prop->pciDomainID, prop->pciBusID, prop->pciDeviceID);
    gpu.compute_major = prop->major;
    gpu.compute_minor = prop->minor;
    gpu.multiprocessors = prop->multiProcessorCount;
    gpu.total_memory = static_cast<int64_t>(prop->totalGlobalMem);
    gpu.free_memory = free_memory(nvml, gpu.pci_bus_id);
    inventory.gpus.push_back(gpu);
  }
}

}  // namespace
#endif

DeviceInventory probe_devices(const std::optional<std::string>& cuda_visible_devices, const std::string& nvml_library) {
  DeviceInventory inventory;
  inventory.cuda_visible_devices = cuda_visible_devices;
  inventory.cpu_threads = static_cast<int>(std::thread::hardware_concurrency());
  inventory.torch_intra_threads = at::get_num_threads();
  inventory.mps_available = at::hasMPS();
#ifdef GPUTRAIN_WITH_CUDA
  probe_cuda(inventory, nvml_library);
#else
  (void)nvml_library;
  inventory.cuda_unavailable_reason = "this LibTorch was built without CUDA";
#endif
  return inventory;
}

}  // namespace gputrain::device
