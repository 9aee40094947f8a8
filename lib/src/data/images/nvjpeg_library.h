#pragma once
// nvJPEG (libnvjpeg.so.13, PyPI's nvidia-nvjpeg wheel) loaded at run time with
// dlopen, never linked: a build or a run without it works as before, and
// data.decode: auto then decodes on the CPU. Only the entry points the GPU
// decoder calls are bound.
//
// The wheel's library needs no libcudart: it carries NVIDIA's static CUDA
// runtime (readelf -d lists only libc's parts; it dlopens libcuda.so.1 itself).
// That runtime works in the driver's primary context, which LibTorch's runtime
// (the torch wheel's libcudart.so.13) uses too, so the device pointers and the
// streams gputrain hands it are LibTorch's, and gputrain itself calls no CUDA
// runtime function.
#include <memory>
#include <string>
#include <vector>

namespace gputrain::data::detail {

// nvjpeg_api.h: the bound entry points (it needs nvjpeg.h: only the files
// built with GPUTRAIN_WITH_NVJPEG see it).
struct NvjpegApi;

struct NvjpegLibrary {
  std::string path;                      // the file loaded; empty when none could be
  std::string version;                   // "13.0.1"
  std::string why_not;                   // why none could be loaded (each place tried); empty when loaded
  std::shared_ptr<const NvjpegApi> api;  // null when not loaded
  bool loaded() const { return api != nullptr; }
};

// Where libnvjpeg.so.13 is looked for, in order: beside LibTorch's CUDA
// libraries (the torch wheel's site-packages/nvidia/cu13/lib, where
// scripts/setup.sh installs the nvidia-nvjpeg wheel), then by its soname
// (LD_LIBRARY_PATH, which holds the GPU bundle's lib/, then the system's).
std::vector<std::string> nvjpeg_search_paths();

// The first of `paths` that loads and has every entry point bound, or why
// none does. Not cached: nvjpeg_library() is the process's one.
NvjpegLibrary load_nvjpeg(const std::vector<std::string>& paths);

// Whether this build can use nvJPEG at all: LibTorch with CUDA, compiled
// against nvjpeg.h.
bool nvjpeg_built();

// The process's nvJPEG: load_nvjpeg(nvjpeg_search_paths()), once (thread-safe).
const NvjpegLibrary& nvjpeg_library();

}  // namespace gputrain::data::detail
