# Shared by the scripts: where LibTorch and the Python venv live. Source it.
# GPUTRAIN_VENV   virtual environment holding the torch wheel (default ~/.cache/gputrain/venv)
# Torch_DIR       an official LibTorch's share/cmake/Torch: the wheel is then not needed
GPUTRAIN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUTRAIN_VENV="${GPUTRAIN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gputrain/venv}"
GPUTRAIN_TORCH_VERSION="2.11.0"
GPUTRAIN_TENSORBOARD_VERSION="2.20.0"  # the tests read event files back with it
GPUTRAIN_ONNXRUNTIME_VERSION="1.32.0"  # the tests run exported ONNX models with it
GPUTRAIN_SAFETENSORS_VERSION="0.8.0"   # the tests read and write safetensors files with it
GPUTRAIN_MLFLOW_VERSION="3.17.2"        # the tests log to a real `mlflow server` and read it back with its client
GPUTRAIN_TORCHVISION_VERSION="0.26.0"  # the release paired with torch 2.11.0: the image ops' pixels are checked against it
GPUTRAIN_PILLOW_VERSION="13.0.0"       # torchvision imports PIL (installed with --no-deps, so pinned here)
GPUTRAIN_NVJPEG_VERSION="13.0.1.86"    # data.decode: gpu: the nvJPEG of torch 2.11.0's CUDA (cuda-toolkit==13.0.2 pins it)
GPUTRAIN_PYTHON="$GPUTRAIN_VENV/bin/python"
# ccache keys on paths relative to the checkout, so other clones share its cache;
# without NOHASHDIR it would also key the sanitizer build (line tables: -g) on the
# build directory's absolute path, and a fresh clone elsewhere (CI) compiled it all again.
CCACHE_BASEDIR="$GPUTRAIN_ROOT"
CCACHE_NOHASHDIR=1
# The precompiled LibTorch header (CMakeLists.txt): ccache caches the files that
# load it only with these; the header is made in the same build, hence the mtimes.
CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
# clang's precompiled header holds the checkout's absolute paths: ccache hashes the
# digest written beside it (cmake/pch_checksum.sh) in its place.
CCACHE_PCH_EXTSUM=1
export CCACHE_BASEDIR CCACHE_NOHASHDIR CCACHE_SLOPPINESS CCACHE_PCH_EXTSUM GPUTRAIN_ROOT GPUTRAIN_VENV GPUTRAIN_TORCH_VERSION GPUTRAIN_TENSORBOARD_VERSION GPUTRAIN_ONNXRUNTIME_VERSION GPUTRAIN_SAFETENSORS_VERSION GPUTRAIN_MLFLOW_VERSION GPUTRAIN_TORCHVISION_VERSION GPUTRAIN_PILLOW_VERSION GPUTRAIN_NVJPEG_VERSION GPUTRAIN_PYTHON

# CMake arguments that locate LibTorch.
gputrain_torch_cmake_args() {
  if [ -n "${Torch_DIR:-}" ]; then
    echo "-DTorch_DIR=$Torch_DIR"
  else
    echo "-DCMAKE_PREFIX_PATH=$("$GPUTRAIN_PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)"
  fi
}
