#!/usr/bin/env bash
# Installs what gputrain needs and is missing; safe to run again (it then does nothing).
# `scripts/setup.sh run` installs only what building and running the program needs
# (scripts/run.sh): no clang, llvm or clang-format (the sanitizer and fuzz build, the
# format check), no chromium or tensorboard (the tests' readers).
#   Debian packages: compilers (clang and its sanitizer and libFuzzer runtimes for the
#                    asan preset), ccache, clang-format (scripts/format.sh), CMake, Ninja, the C++ libraries
#                    (libonnx-dev and libprotobuf-dev for `export --format onnx`, libcurl4-openssl-dev for
#                    `datasets download`), the real Fashion-MNIST
#   LibTorch: the PyPI wheel torch==2.11.0 (built for CUDA 13.0) in $GPUTRAIN_VENV,
#             unless Torch_DIR points at an official LibTorch; with it nvidia-nvjpeg
#             (data.decode: gpu's nvJPEG, whose header the CUDA build needs).
#   Test tools: chromium (the HTML report's browser test), and in the venv tensorboard
#             (the event files' round trip through TensorBoard's own reader) and
#             onnxruntime (it runs every model `export --format onnx` writes) and safetensors
#             (it reads what `export --format safetensors` writes, and writes files gputrain reads),
#             and torchvision with pillow (the image augmentations' pixels are compared with its own;
#             with the torch wheel only: --no-deps, so that pip never replaces torch).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

for_tests=1
[ "${1:-}" = run ] && for_tests=0
packages=(cmake ninja-build ccache g++ pkg-config libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev zlib1g-dev
          libminizip-dev libpng-dev libjpeg62-turbo-dev nlohmann-json3-dev libgloo-dev libtcmalloc-minimal4 dataset-fashion-mnist
          libonnx-dev libprotobuf-dev libcurl4-openssl-dev)
[ "$for_tests" = 1 ] && packages+=(clang clang-format libclang-rt-14-dev llvm chromium)
python3 -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3 python3-venv)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

if [ -n "${Torch_DIR:-}" ]; then
  [ -f "$Torch_DIR/TorchConfig.cmake" ] || { echo "setup: Torch_DIR=$Torch_DIR has no TorchConfig.cmake" >&2; exit 2; }
  echo "setup: using LibTorch from Torch_DIR=$Torch_DIR"
else
  if ! "$GPUTRAIN_PYTHON" -c "import torch, sys; sys.exit(not torch.__version__.startswith('$GPUTRAIN_TORCH_VERSION'))" 2>/dev/null; then
    echo "setup: installing torch==$GPUTRAIN_TORCH_VERSION into $GPUTRAIN_VENV (LibTorch for CUDA 13.0; about 3 GB)"
    mkdir -p "$(dirname "$GPUTRAIN_VENV")"
    [ -x "$GPUTRAIN_PYTHON" ] || python3 -m venv "$GPUTRAIN_VENV"
    "$GPUTRAIN_PYTHON" -m pip install -q --upgrade pip
    "$GPUTRAIN_PYTHON" -m pip install -q "torch==$GPUTRAIN_TORCH_VERSION"
  fi
  # nvJPEG for data.decode: gpu (the build needs its header; the library is loaded at run time
  # when present): the release torch's CUDA pins (cuda-toolkit==13.0.2's nvjpeg), --no-deps.
  [ -f "$("$GPUTRAIN_PYTHON" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/../nvidia/cu13/include/nvjpeg.h" ] ||
    "$GPUTRAIN_PYTHON" -m pip install -q --no-deps "nvidia-nvjpeg==$GPUTRAIN_NVJPEG_VERSION"
  # numpy: the Python side of the tests and benchmarks (and it silences torch's warning).
  "$GPUTRAIN_PYTHON" -c 'import numpy' 2>/dev/null || "$GPUTRAIN_PYTHON" -m pip install -q numpy
fi
# TensorBoard, ONNX Runtime, safetensors and MLflow read back what gputrain writes in the tests; the venv may exist without torch (Torch_DIR).
if [ "$for_tests" = 1 ]; then
  [ -x "$GPUTRAIN_PYTHON" ] || { mkdir -p "$(dirname "$GPUTRAIN_VENV")"; python3 -m venv "$GPUTRAIN_VENV"; }
  "$GPUTRAIN_PYTHON" -c 'import tensorboard' 2>/dev/null ||
    "$GPUTRAIN_PYTHON" -m pip install -q "tensorboard==$GPUTRAIN_TENSORBOARD_VERSION"
  "$GPUTRAIN_PYTHON" -c 'import onnxruntime' 2>/dev/null ||
    "$GPUTRAIN_PYTHON" -m pip install -q "onnxruntime==$GPUTRAIN_ONNXRUNTIME_VERSION"
  "$GPUTRAIN_PYTHON" -c 'import safetensors' 2>/dev/null ||
    "$GPUTRAIN_PYTHON" -m pip install -q "safetensors==$GPUTRAIN_SAFETENSORS_VERSION"
  "$GPUTRAIN_PYTHON" -c 'import mlflow' 2>/dev/null ||
    "$GPUTRAIN_PYTHON" -m pip install -q "mlflow==$GPUTRAIN_MLFLOW_VERSION"
  if [ -z "${Torch_DIR:-}" ]; then
    "$GPUTRAIN_PYTHON" -c 'import PIL' 2>/dev/null ||
      "$GPUTRAIN_PYTHON" -m pip install -q "pillow==$GPUTRAIN_PILLOW_VERSION"
    "$GPUTRAIN_PYTHON" -c 'import torchvision' 2>/dev/null ||
      "$GPUTRAIN_PYTHON" -m pip install -q --no-deps "torchvision==$GPUTRAIN_TORCHVISION_VERSION"
  fi
fi

echo "setup: ready"
