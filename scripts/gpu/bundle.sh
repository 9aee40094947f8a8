#!/usr/bin/env bash
# Builds Release and packs what a bare GPU machine with the torch 2.11.0+cu130 wheel needs to
# run the GPU proof (prove.sh) into DIR (default .device/, git-ignored):
#
#   DIR/gputrain, DIR/tests/<the binaries holding *_CUDA tests>    stripped
#   DIR/lib/       every shared library ldd shows that is neither LibTorch's (the wheel's
#                  torch/lib and nvidia/*, which the machine has) nor the C/C++ runtime's,
#                  and libnvjpeg.so.13.xz (loaded at run time; not part of the torch wheel)
#   DIR/configs/, DIR/scripts/bench/ (the harness, the references, race.py), DIR/prove.sh, DIR/summarize.py, DIR/speed.py
#   DIR/fashion-mnist/  the real Fashion-MNIST, where this machine has it
#
# GPUTRAIN_BUNDLE_NO_BUILD=1 skips the build; GPUTRAIN_BUNDLE_FASHION=0 leaves the real Fashion-MNIST out;
# GPUTRAIN_BUNDLE_WHEELS=1 adds issue 41's races (train_race.sh, torchvision's and pillow's wheels).
# Fails above 56 MiB. Prints, on stdout, the one command to run on the GPU machine from the
# repository root there; the results land in $OUT.
set -euo pipefail
# shellcheck disable=SC1091  # env.sh: the shared locations (GPUTRAIN_ROOT, GPUTRAIN_PYTHON)
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$GPUTRAIN_ROOT"
DIR="${1:-.device}"
LIMIT_MIB=56  # the device tool carries 64 MiB with the work tree (about 3 MiB)

# GPUTRAIN_BUNDLE_NO_BUILD=1 packs build/release as it is (a build already under way there
# must not be raced by a second one).
if [ "${GPUTRAIN_BUNDLE_NO_BUILD:-0}" != 1 ]; then
  "$GPUTRAIN_ROOT/scripts/build.sh" release >&2
fi

# The executables of every GPU test (named *_CUDA, whatever the binary's label), as CTest knows
# them: not a hard-coded list, so a new GPU case is bundled without touching this script.
mapfile -t tests < <(ctest --preset release -R '_CUDA$' --show-only=json-v1 | python3 -c '
import json, sys
seen = []
for t in json.load(sys.stdin)["tests"]:
    exe = (t.get("command") or [None])[0]
    if exe and exe not in seen:
        seen.append(exe)
print("\n".join(seen))')
[ "${#tests[@]}" -gt 0 ] || { echo "bundle.sh: CTest lists no test named *_CUDA" >&2; exit 1; }
binary="$GPUTRAIN_ROOT/build/release/app/gputrain"

rm -rf "$DIR"
mkdir -p "$DIR/lib" "$DIR/tests" "$DIR/scripts/bench"
# Stripped copies: the symbols are most of a binary's size, and the GPU run needs none.
strip -o "$DIR/gputrain" "$binary"
for t in "${tests[@]}"; do strip -o "$DIR/tests/$(basename "$t")" "$t"; done

# LibTorch's own libraries come from the GPU machine's wheel (LD_LIBRARY_PATH), as do the
# NVIDIA ones it loads; the C and C++ runtimes (glibc's parts included) are the system's.
# Everything else is copied.
torch_lib="$("$GPUTRAIN_PYTHON" -c 'import torch, os; print(os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib")))')"
site="$(dirname "$(dirname "$torch_lib")")"
system='^(linux-vdso|ld-linux[^ ]*|libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libutil|libresolv)\.so'
copied=()
for bin in "$binary" "${tests[@]}"; do
  while read -r name _ path _; do
    [ -n "$name" ] || continue
    if [ "$path" = "not" ]; then
      echo "bundle.sh: ldd finds no $name for $bin" >&2; exit 1
    fi
    [[ "$name" =~ $system ]] && continue
    real="$(realpath "$path")"
    case "$real" in "$torch_lib"/* | "$site"/nvidia/* | "$site"/torch/*) continue ;; esac
    if [ ! -e "$DIR/lib/$name" ]; then
      cp -L "$path" "$DIR/lib/$name"
      copied+=("$name")
    fi
  done < <(ldd "$bin" | awk '/=>/ { print $1, $2, $3, $4 }')
done
# The distribution's libraries keep symbol tables their users never read.
strip --strip-unneeded "$DIR"/lib/*.so* 2>/dev/null || true
# nvJPEG (data.decode: gpu) is loaded at run time, so ldd does not list it. Carried for a GPU
# machine whose torch install lacks the nvidia-nvjpeg wheel: gputrain looks beside torch's
# libraries first, then by soname (the command below puts DIR/lib on LD_LIBRARY_PATH). xz-packed
# (5.6 MiB -> 3.1 MiB, under the limit below); prove.sh unpacks it before its first step.
nvjpeg="$site/nvidia/cu13/lib/libnvjpeg.so.13"
[ -e "$nvjpeg" ] || { echo "bundle.sh: no $nvjpeg (scripts/setup.sh installs nvidia-nvjpeg)" >&2; exit 1; }
"$GPUTRAIN_PYTHON" -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.compress(open(sys.argv[1], "rb").read(), preset=9))' \
  "$nvjpeg" "$DIR/lib/libnvjpeg.so.13.xz"
copied+=(libnvjpeg.so.13)

cp -r configs "$DIR/configs"
cp scripts/bench/run.py scripts/bench/reference.py scripts/bench/fast_paths.py scripts/bench/reference_fast.py \
  scripts/bench/time_to_target.py scripts/bench/reference_best.py scripts/bench/race.py "$DIR/scripts/bench/"
cp scripts/gpu/prove.sh scripts/gpu/race.sh scripts/gpu/summarize.py scripts/gpu/speed.py "$DIR/"
# The real Fashion-MNIST (30 MiB), where this machine has it: the GPU machines so far had none, and the
# kit's accuracy floors hold only on the real set (prove.sh reads DIR/fashion-mnist first).
# GPUTRAIN_BUNDLE_FASHION=0 leaves it out (prove.sh then trains on its IDX stand-in and judges no
# accuracy floor): with it the bundle is near the limit below, and a call that selects only some
# steps (PROVE_ONLY) may not need it.
FASHION=/usr/share/datasets/fashion-mnist
if [ "${GPUTRAIN_BUNDLE_FASHION:-1}" != 0 ] && [ -e "$FASHION/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$DIR/fashion-mnist"
  cp "$FASHION"/*-ubyte.gz "$DIR/fashion-mnist/"
fi
# GPUTRAIN_BUNDLE_WHEELS=1: issue 41's races (train_race.sh) with torchvision's and pillow's wheels
# (14 MiB), which the GPU machine's torch install lacks, for its Python (GPUTRAIN_BUNDLE_PYTHON,
# 3.12 on the machines so far: /opt/torch/.venv/lib/python3.12).
if [ "${GPUTRAIN_BUNDLE_WHEELS:-0}" = 1 ]; then
  "$GPUTRAIN_PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    --python-version "${GPUTRAIN_BUNDLE_PYTHON:-3.12}" -d "$DIR/wheels" \
    "torchvision==$GPUTRAIN_TORCHVISION_VERSION" "pillow==$GPUTRAIN_PILLOW_VERSION" >&2
  cp scripts/bench/make_image_folder.py scripts/bench/loader_race.py scripts/bench/train_race.py scripts/bench/race_common.py \
    "$DIR/scripts/bench/"
  cp scripts/gpu/train_race.sh "$DIR/"
fi
{
  echo "gputrain GPU proof bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib app 2>/dev/null || echo ' (with uncommitted changes)')"
  "$binary" --version
} >"$DIR/BUNDLE.txt"

bytes=$(du -sb "$DIR" | cut -f1)
mib=$(awk "BEGIN { printf \"%.1f\", $bytes / 1048576 }")
{
  echo "bundle.sh: $DIR holds $(find "$DIR" -type f | wc -l) files, $mib MiB:"
  (cd "$DIR" && find . -type f ! -path './configs/*' | sort | sed 's/^/  /')
  echo "  configs/: $(find "$DIR/configs" -type f | wc -l) files"
  echo "bundle.sh: libraries bundled: ${copied[*]:-none}"
} >&2
if [ "$bytes" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "bundle.sh: $DIR is $mib MiB, over the $LIMIT_MIB MiB limit" >&2
  exit 1
fi

# The directory as seen from the repository root (where the GPU machine's copy starts).
rel="$(realpath --relative-to="$GPUTRAIN_ROOT" "$DIR")"
case "$rel" in ../*) rel="$(realpath "$DIR")" ;; esac
echo "bundle.sh: copy $rel to the GPU machine (it is git-ignored: carry it), then run from the repository root:" >&2
# shellcheck disable=SC2016  # printed for the other machine's shell to expand
printf 'cd %q && LD_LIBRARY_PATH="$(python3 -c '"'"'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))'"'"'):$PWD/lib" ./prove.sh "$OUT"\n' "$rel"
