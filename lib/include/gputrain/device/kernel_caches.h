#pragma once
// The on-disk caches of GPU kernels compiled at run time, which LibTorch and
// CUDA keep across runs unless the environment turns them off or points them
// where nothing can be written: LibTorch's NVRTC kernels (the jiterator's
// elementwise ops, aten/src/ATen/native/cuda/jit_utils.cpp) and the CUDA
// driver's JIT of PTX for a GPU whose architecture a library ships no
// machine code for. A run on a GPU says where they are, or why one is not
// kept and how to keep it: a kernel not cached is compiled again in every
// run's first epoch. cuDNN's algorithm search (train.cudnn_benchmark) is not
// among them: LibTorch keeps its results in the process only.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gputrain::device {

// The environment variables that decide where the caches are (app/ reads them).
struct KernelCacheEnv {
  std::optional<std::string> home;                       // HOME
  std::optional<std::string> xdg_cache_home;             // XDG_CACHE_HOME
  std::optional<std::string> pytorch_kernel_cache_path;  // PYTORCH_KERNEL_CACHE_PATH
  std::optional<std::string> use_pytorch_kernel_cache;   // USE_PYTORCH_KERNEL_CACHE: "0" turns it off
  std::optional<std::string> cuda_cache_path;            // CUDA_CACHE_PATH
  std::optional<std::string> cuda_cache_disable;         // CUDA_CACHE_DISABLE: "1" turns it off
};

struct KernelCache {
  std::string name;           // "the kernels CUDA compiles from PTX"
  std::filesystem::path dir;  // where it is kept; empty when there is none
  std::string not_kept;       // empty: kept across runs; else why not and how to keep it
};

// Both caches, as LibTorch and the CUDA driver resolve them from `env`. A
// cache is kept when it is on and its directory exists as a writable
// directory or can be created (its nearest existing parent is a writable directory).
std::vector<KernelCache> kernel_caches(const KernelCacheEnv& env);

// "kernel caches (kept across runs): NAME in DIR; NAME in DIR" for the kept
// ones, empty when none is.
std::string describe_kept(const std::vector<KernelCache>& caches);

}  // namespace gputrain::device
