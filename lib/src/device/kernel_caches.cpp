#include "gputrain/device/kernel_caches.h"

#include <fmt/format.h>
#include <unistd.h>

#include <system_error>

namespace gputrain::device {

namespace {

bool writable_directory(const std::filesystem::path& dir) {
  std::error_code error;
  return std::filesystem::is_directory(dir, error) && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// `dir` is a writable directory, or the first of its parents that exists is
// one, so that it can be made. A regular file on the way ends the search.
bool can_hold(const std::filesystem::path& dir) {
  std::error_code error;
  // Absolute, so that a relative path's search reaches the working directory.
  for (std::filesystem::path at = std::filesystem::absolute(dir, error); !at.empty(); at = at.parent_path()) {
    if (std::filesystem::exists(at, error)) return writable_directory(at);
    if (at == at.parent_path()) break;
  }
  return false;
}

KernelCache cache_in(std::string name, const std::filesystem::path& dir, const std::string& variable) {
  if (can_hold(dir)) return {std::move(name), dir, ""};
  return {
      std::move(name), dir,
      fmt::format("{} is not a writable directory and cannot be made one; point {} at one", dir.string(), variable)};
}

// aten/src/ATen/native/cuda/jit_utils.cpp's get_cache_dir: PYTORCH_KERNEL_CACHE_PATH
// as given (LibTorch does not create it), else XDG_CACHE_HOME/torch/kernels,
// else HOME/.cache/torch/kernels.
KernelCache libtorch_cache(const KernelCacheEnv& env) {
  std::string name = "the kernels LibTorch compiles with NVRTC";
  if (env.use_pytorch_kernel_cache == "0") {
    return {std::move(name), {}, "USE_PYTORCH_KERNEL_CACHE=0 turns their cache off; unset it"};
  }
  if (env.pytorch_kernel_cache_path) {
    const std::filesystem::path dir = *env.pytorch_kernel_cache_path;
    if (writable_directory(dir)) return {std::move(name), dir, ""};
    return {std::move(name), dir,
            fmt::format("PYTORCH_KERNEL_CACHE_PATH={} is not a writable directory (LibTorch does not make it); "
                        "create it or point the variable at one",
                        dir.string())};
  }
  if (env.xdg_cache_home) {
    return cache_in(std::move(name), std::filesystem::path(*env.xdg_cache_home) / "torch" / "kernels",
                    "PYTORCH_KERNEL_CACHE_PATH");
  }
  if (env.home) {
    return cache_in(std::move(name), std::filesystem::path(*env.home) / ".cache" / "torch" / "kernels",
                    "PYTORCH_KERNEL_CACHE_PATH");
  }
  return {std::move(name), {}, "neither HOME nor PYTORCH_KERNEL_CACHE_PATH is set; set one to a writable directory"};
}

// The CUDA driver's compute cache: CUDA_CACHE_PATH, else HOME/.nv/ComputeCache.
KernelCache cuda_cache(const KernelCacheEnv& env) {
  std::string name = "the kernels CUDA compiles from PTX";
  if (env.cuda_cache_disable == "1") {
    return {std::move(name), {}, "CUDA_CACHE_DISABLE=1 turns their cache off; unset it"};
  }
  if (env.cuda_cache_path) return cache_in(std::move(name), *env.cuda_cache_path, "CUDA_CACHE_PATH");
  if (env.home) {
    return cache_in(std::move(name), std::filesystem::path(*env.home) / ".nv" / "ComputeCache", "CUDA_CACHE_PATH");
  }
  return {std::move(name), {}, "neither HOME nor CUDA_CACHE_PATH is set; set one to a writable directory"};
}

}  // namespace

std::vector<KernelCache> kernel_caches(const KernelCacheEnv& env) { return {libtorch_cache(env), cuda_cache(env)}; }

std::string describe_kept(const std::vector<KernelCache>& caches) {
  std::string kept;
  for (const KernelCache& cache : caches) {
    if (!cache.not_kept.empty()) continue;
    kept += fmt::format("{}{} in {}", kept.empty() ? "" : "; ", cache.name, cache.dir.string());
  }
  return kept.empty() ? "" : "kernel caches (kept across runs): " + kept;
}

}  // namespace gputrain::device
