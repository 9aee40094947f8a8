#include "images/nvjpeg_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <c10/core/Allocator.h>
#include <filesystem>

#if GPUTRAIN_WITH_NVJPEG
#include "images/nvjpeg_api.h"
#endif

namespace gputrain::data::detail {

namespace {

constexpr const char* kSoname = "libnvjpeg.so.13";

// The directory of the loaded library that holds `symbol`.
std::filesystem::path library_dir(void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code error;
  const std::filesystem::path file = std::filesystem::canonical(info.dli_fname, error);
  return error ? std::filesystem::path() : file.parent_path();
}

#if GPUTRAIN_WITH_NVJPEG
template <typename F>
bool bind(void* handle, F& function, const char* name, const std::string& path, std::string& why) {
  function = reinterpret_cast<F>(dlsym(handle, name));
  if (function == nullptr) why = fmt::format("{} has no {}", path, name);
  return function != nullptr;
}

// Every entry point, and the version; `why` says what failed.
bool bind_all(void* handle, NvjpegApi& lib, std::string& version, const std::string& path, std::string& why) {
  if (!bind(handle, lib.get_property, "nvjpegGetProperty", path, why) ||
      !bind(handle, lib.create_ex, "nvjpegCreateEx", path, why) ||
      !bind(handle, lib.destroy, "nvjpegDestroy", path, why) ||
      !bind(handle, lib.state_create, "nvjpegJpegStateCreate", path, why) ||
      !bind(handle, lib.state_destroy, "nvjpegJpegStateDestroy", path, why) ||
      !bind(handle, lib.get_image_info, "nvjpegGetImageInfo", path, why) ||
      !bind(handle, lib.decode, "nvjpegDecode", path, why) ||
      !bind(handle, lib.decode_batched_initialize, "nvjpegDecodeBatchedInitialize", path, why) ||
      !bind(handle, lib.decode_batched, "nvjpegDecodeBatched", path, why)) {
    return false;
  }
  int major = 0, minor = 0, patch = 0;
  if (lib.get_property(MAJOR_VERSION, &major) != NVJPEG_STATUS_SUCCESS ||
      lib.get_property(MINOR_VERSION, &minor) != NVJPEG_STATUS_SUCCESS ||
      lib.get_property(PATCH_LEVEL, &patch) != NVJPEG_STATUS_SUCCESS) {
    why = fmt::format("{} does not say its version", path);
    return false;
  }
  version = fmt::format("{}.{}.{}", major, minor, patch);
  return true;
}
#endif

}  // namespace

std::vector<std::string> nvjpeg_search_paths() {
  std::vector<std::string> paths;
  // LibTorch's libc10 (c10::GetAllocator's file) lives in the wheel's torch/lib; the NVIDIA wheels beside it in
  // nvidia/cu13/lib.
  const std::filesystem::path torch_lib = library_dir(reinterpret_cast<void*>(&c10::GetAllocator));
  if (!torch_lib.empty())
    paths.push_back((torch_lib.parent_path().parent_path() / "nvidia/cu13/lib" / kSoname).string());
  paths.emplace_back(kSoname);
  return paths;
}

NvjpegLibrary load_nvjpeg(const std::vector<std::string>& paths) {
  NvjpegLibrary lib;
#if GPUTRAIN_WITH_NVJPEG
  std::vector<std::string> tried;
  for (const std::string& path : paths) {
    // A path that names a directory is tried as a file; dlopen says why it fails.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      tried.push_back(error != nullptr ? error : path);
      continue;
    }
    std::string why;
    auto api = std::make_shared<NvjpegApi>();
    if (bind_all(handle, *api, lib.version, path, why)) {
      // Kept loaded for the process: decoders may be made at any time.
      Dl_info info{};
      lib.path = dladdr(reinterpret_cast<void*>(api->get_property), &info) != 0 && info.dli_fname != nullptr
                     ? std::string(info.dli_fname)
                     : path;
      lib.api = std::move(api);
      return lib;
    }
    tried.push_back(why);
    dlclose(handle);
  }
  lib.why_not = fmt::format(
      "nvJPEG could not be loaded ({}); install it in LibTorch's Python environment: pip install nvidia-nvjpeg "
      "(scripts/setup.sh does)",
      fmt::join(tried, "; "));
#else
  (void)paths;
  lib.why_not = "this build of gputrain has no CUDA (LibTorch without CUDA), so no nvJPEG";
#endif
  return lib;
}

bool nvjpeg_built() { return GPUTRAIN_WITH_NVJPEG + 0 == 1; }

const NvjpegLibrary& nvjpeg_library() {
  static const NvjpegLibrary library = load_nvjpeg(nvjpeg_search_paths());
  return library;
}

}  // namespace gputrain::data::detail
