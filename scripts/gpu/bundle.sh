#!/usr/bin/env bash
# Builds Release and packs what a bare GPU machine with the torch 2.11.0+cu130 wheel (and torchvision 0.26 beside
# it, as the device's image has) needs for every call of prove.sh (plan.tsv) into DIR (default .device/, git-ignored):
#
#   DIR/gputrain.xz, DIR/tests/<the binaries holding *_CUDA tests>.xz   stripped, then xz-packed
#   DIR/lib/*.xz   every shared library ldd shows that is neither LibTorch's (the wheel's torch/lib and nvidia/*,
#                  which the machine has) nor the C/C++ runtime's, and nvJPEG (loaded at run time; not in the wheel)
#   DIR/configs/, DIR/scripts/bench/ (what the calls run: the harness, the races and their PyTorch references, the
#                  JPEG folder's generator), DIR/prove.sh, DIR/plan.tsv, DIR/summarize.py, DIR/speed.py, DIR/BUNDLE.txt
#   DIR/fashion-mnist/  the real Fashion-MNIST (the record sweep, the races and the accuracy floors need it), where
#                  this machine has it
#
# prove.sh unpacks the .xz files before its first step. The device carries at most 64 MiB a call: the bundle and the
# working tree that travels with it together. The bundle is made in a temporary directory and measured with the
# tree first: over the limit it fails, and DIR stays as it was.
#
# GPUTRAIN_BUNDLE_NO_BUILD=1 skips the build; GPUTRAIN_BUNDLE_FASHION=0 leaves the real Fashion-MNIST out.
# Prints, on stdout, the command to run on the GPU machine from the repository root there (scripts/gpu/README.md
# gives both calls' device-tool commands); the results land in $OUT.
set -euo pipefail
# shellcheck disable=SC1091  # env.sh: the shared locations (GPUTRAIN_ROOT, GPUTRAIN_PYTHON)
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$GPUTRAIN_ROOT"
DIR="${1:-.device}"
LIMIT_MIB=63  # the device carries 64 MiB a call, the working tree included; 1 MiB to spare

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

STAGE="$(mktemp -d "${TMPDIR:-/tmp}/gputrain-bundle.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT
chmod 755 "$STAGE"  # mktemp's 700 would become DIR's
mkdir -p "$STAGE/lib" "$STAGE/tests" "$STAGE/scripts/bench"
# Stripped copies: the symbols are most of a binary's size, and the GPU run needs none.
strip -o "$STAGE/gputrain" "$binary"
for t in "${tests[@]}"; do strip -o "$STAGE/tests/$(basename "$t")" "$t"; done

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
    if [ ! -e "$STAGE/lib/$name" ]; then
      cp -L "$path" "$STAGE/lib/$name"
      copied+=("$name")
    fi
  done < <(ldd "$bin" | awk '/=>/ { print $1, $2, $3, $4 }')
done
# The distribution's libraries keep symbol tables their users never read.
strip --strip-unneeded "$STAGE"/lib/*.so* 2>/dev/null || true
# nvJPEG (data.decode: gpu) is loaded at run time, so ldd does not list it. Carried for a GPU
# machine whose torch install lacks the nvidia-nvjpeg wheel: gputrain looks beside torch's
# libraries first, then by soname (prove.sh puts DIR/lib on LD_LIBRARY_PATH).
nvjpeg="$site/nvidia/cu13/lib/libnvjpeg.so.13"
[ -e "$nvjpeg" ] || { echo "bundle.sh: no $nvjpeg (scripts/setup.sh installs nvidia-nvjpeg)" >&2; exit 1; }
cp -L "$nvjpeg" "$STAGE/lib/libnvjpeg.so.13"
copied+=(libnvjpeg.so.13)
# xz: about a third of the size (the binaries 20.6 -> 6.4 MiB, nvJPEG 5.6 -> 3.1), which makes room for the real
# Fashion-MNIST within the device's 64 MiB. The mode is kept for prove.sh's unpacking.
"$GPUTRAIN_PYTHON" - "$STAGE/gputrain" "$STAGE"/tests/* "$STAGE"/lib/* <<'PY'
import lzma, os, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f, open(path + ".xz", "wb") as out:
        out.write(lzma.compress(f.read(), preset=9))
    os.chmod(path + ".xz", os.stat(path).st_mode)
    os.remove(path)
PY

cp -r configs "$STAGE/configs"
cp scripts/bench/run.py scripts/bench/reference.py scripts/bench/fast_paths.py scripts/bench/reference_fast.py \
  scripts/bench/time_to_target.py scripts/bench/reference_best.py scripts/bench/race.py scripts/bench/race_common.py \
  scripts/bench/train_race.py scripts/bench/loader_race.py scripts/bench/make_image_folder.py "$STAGE/scripts/bench/"
cp scripts/gpu/prove.sh scripts/gpu/plan.tsv scripts/gpu/summarize.py scripts/gpu/speed.py "$STAGE/"
# The real Fashion-MNIST (30 MiB, already gzip-packed), where this machine has it: the GPU machines so far had none,
# and the record, the races and the kit's accuracy floors hold only on the real set (prove.sh reads
# DIR/fashion-mnist first). GPUTRAIN_BUNDLE_FASHION=0 leaves it out (prove.sh then trains on its IDX stand-in).
FASHION=/usr/share/datasets/fashion-mnist
if [ "${GPUTRAIN_BUNDLE_FASHION:-1}" != 0 ] && [ -e "$FASHION/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$STAGE/fashion-mnist"
  cp "$FASHION"/*-ubyte.gz "$STAGE/fashion-mnist/"
fi
{
  echo "gputrain GPU proof bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname)"
  echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib app 2>/dev/null || echo ' (with uncommitted changes)')"
  "$binary" --version
} >"$STAGE/BUNDLE.txt"

# What travels with the bundle: the working tree's tracked and untracked-but-not-ignored files.
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
bytes=$(du -sb "$STAGE" | cut -f1)
mib() { awk "BEGIN { printf \"%.1f\", $1 / 1048576 }"; }
{
  echo "bundle.sh: $(find "$STAGE" -type f | wc -l) files, $(mib "$bytes") MiB, with the working tree's $(mib "$tree") MiB:" \
    "$(mib $((bytes + tree))) MiB a call (the limit: $LIMIT_MIB)"
  (cd "$STAGE" && find . -type f ! -path './configs/*' -printf '%s %p\n' | sort -k2 |
    awk '{ printf "  %-48s %7.2f MiB\n", $2, $1 / 1048576 }')
  echo "  configs/: $(find "$STAGE/configs" -type f | wc -l) files"
  echo "bundle.sh: libraries bundled: ${copied[*]:-none}"
} >&2
if [ $((bytes + tree)) -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "bundle.sh: the bundle ($(mib "$bytes") MiB) and the working tree ($(mib "$tree") MiB) are over the" \
    "$LIMIT_MIB MiB a device call carries; $DIR is left as it was" >&2
  exit 1
fi
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
cp -a "$STAGE" "$DIR"

# The directory as seen from the repository root (where the GPU machine's copy starts).
rel="$(realpath --relative-to="$GPUTRAIN_ROOT" "$DIR")"
case "$rel" in ../*) rel="$(realpath "$DIR")" ;; esac
echo "bundle.sh: carry $rel (it is git-ignored), then run from the repository root there (--call 1, then 2):" >&2
# shellcheck disable=SC2016  # printed for the other machine's shell to expand
printf '%q/prove.sh "$OUT" --call 1\n' "$rel"
