#!/usr/bin/env bash
# Checks the wheel scripts/package.sh built (dist/gputrain-*.whl) as a user meets it:
#   1. installs it into a fresh venv, with torch and its NVIDIA libraries from a local
#      wheelhouse (GPUTRAIN_WHEELHOUSE, default ~/.cache/gputrain/wheelhouse: `pip download`
#      fills it once; later runs need no network);
#   2. outside the checkout: gputrain --version, info, configs, and the Fashion-MNIST MLP of
#      `gputrain configs fashion_mnist` trained to its usual test accuracy (>= 0.85);
#   3. every library the installed program needs resolves inside the wheel, the torch package
#      or the system's C and C++ runtime, nothing from the build tree or /usr/local/cuda and
#      nothing "not found" (ldd);
#   4. the program runs (--version, info, one epoch, and datasets download from a local server through
#      the bundled libcurl) with the system's library folder
#      replaced by one holding only that runtime (a private mount namespace; needs root,
#      skipped without it): as on a machine without any of the Debian packages gputrain builds with.
# Exit 0 when all pass. CTest runs it under the label `release` (tests/cli/CMakeLists.txt).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
wheel=$(ls "$GPUTRAIN_ROOT"/dist/gputrain-*.whl)
wheelhouse="${GPUTRAIN_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/gputrain/wheelhouse}"
work=$(mktemp -d /tmp/gputrain-wheel-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
step() { echo "check_wheel: $*"; }
fail() { echo "check_wheel: FAILED: $*" >&2; exit 1; }

step "$(basename "$wheel"), $(du -h "$wheel" | cut -f1)"
mkdir -p "$wheelhouse"
if ! "$GPUTRAIN_PYTHON" -m pip download -q --no-index --find-links "$wheelhouse" -d "$work/probe" \
     "torch==$GPUTRAIN_TORCH_VERSION" >/dev/null 2>&1; then
  step "filling the wheelhouse $wheelhouse with torch==$GPUTRAIN_TORCH_VERSION and its dependencies (about 2.7 GB)"
  "$GPUTRAIN_PYTHON" -m pip download -q -d "$wheelhouse" "torch==$GPUTRAIN_TORCH_VERSION"
fi
rm -rf "$work/probe"

# 1. A fresh venv, from the same Python as the build's (the wheelhouse's wheels are for it).
base_python=$("$GPUTRAIN_PYTHON" -c 'import sys; print(sys._base_executable)')
"$base_python" -m venv "$work/venv"
start=$(date +%s)
"$work/venv/bin/python" -m pip install -q --no-index --find-links "$wheelhouse" "$wheel"
step "installed into a fresh venv in $(( $(date +%s) - start )) s (torch from the wheelhouse)"
gputrain="$work/venv/bin/gputrain"
program=$("$work/venv/bin/python" -c 'import gputrain; print(gputrain.binary())')

# 2. Outside the checkout, through the venv's `gputrain` command.
mkdir -p "$work/run" && cd "$work/run"
"$gputrain" --version | tee "$work/version"
grep -qE '^commit ([0-9a-f]+(-dirty)?|unknown)$' "$work/version" || fail "--version names no commit"
"$work/venv/bin/python" -m gputrain --version | cmp -s - "$work/version" || fail "python -m gputrain --version differs"
"$gputrain" info >"$work/info" 2>&1 || { cat "$work/info"; fail "gputrain info"; }
grep -E 'gputrain|LibTorch|CUDA available' "$work/info" | head -4
"$gputrain" configs | grep -q '^fashion_mnist ' || fail "gputrain configs does not list fashion_mnist"
"$gputrain" configs fashion_mnist >fashion_mnist.yaml
data_root=/usr/share/datasets/fashion-mnist
[ -f "$data_root/train-images-idx3-ubyte.gz" ] || { data_root="$work/fashion-mnist"; "$gputrain" datasets download fashion_mnist --root "$data_root"; }
"$gputrain" --log-level warn train --config fashion_mnist.yaml --set "data.root=$data_root" --set device=cpu \
  >"$work/train.out" 2>"$work/train.err" || { tail -20 "$work/train.err"; fail "training the MLP"; }
accuracy=$("$work/venv/bin/python" -c '
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
print(json.loads(lines[-1])["test_accuracy"])' "$work/train.out")
step "trained fashion_mnist from $work/run: test accuracy $accuracy"
"$work/venv/bin/python" -c "import sys; sys.exit(not float('$accuracy') >= 0.85)" || fail "accuracy $accuracy < 0.85"

# 3. What the installed program links, and from where.
ldd "$program" >"$work/ldd"
if grep -E 'not found|/usr/local/cuda|'"$GPUTRAIN_ROOT" "$work/ldd"; then fail "ldd: the lines above"; fi
site=$(dirname "$(dirname "$(dirname "$program")")")
step "the program's NEEDED libraries and where they resolve (site-packages = $site):"
for needed in $(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  echo "  $needed => $(grep -F "$needed =>" "$work/ldd" | sed 's/.*=> \([^ ]*\).*/\1/' | sed "s|$site|site-packages|")"
done
outside=$(grep '=>' "$work/ldd" | sed 's/.*=> \([^ ]*\).*/\1/' | grep -v "^$site/" |
          grep -vE '/lib(c|m|dl|rt|pthread|util|gcc_s|stdc\+\+|z|resolv)\.so' || true)
[ -z "$outside" ] || fail "libraries outside the wheel, torch and the C/C++ runtime: $outside"

# 4. With the system's library folder holding only the C and C++ runtime.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  libdir=$(dirname "$(grep -F 'libc.so.6 =>' "$work/ldd" | sed 's/.*=> \([^ ]*\).*/\1/')")
  mkdir -p "$work/runtime"
  for lib in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libdl.so.2 librt.so.1 libpthread.so.0 \
             libutil.so.1 libresolv.so.2 libgcc_s.so.1 libstdc++.so.6 libz.so.1; do
    [ ! -e "$libdir/$lib" ] || cp -L "$libdir/$lib" "$work/runtime/"
  done
  cat >"$work/bare.sh" <<EOF
set -e
if [ -d /usr/local/cuda ]; then mount -t tmpfs none /usr/local/cuda; fi
mount --bind "$work/runtime" "$libdir"
exec env -u LD_LIBRARY_PATH "\$@"
EOF
  bare() { unshare -m --propagation private bash "$work/bare.sh" "$@"; }
  # The control: ls needs libselinux, which is now hidden.
  if bare /bin/ls / >/dev/null 2>&1; then fail "the system's libraries are not hidden: /bin/ls still runs"; fi
  bare "$libdir/ld-linux-x86-64.so.2" --list "$program" >"$work/bare.ldd" 2>&1 || { cat "$work/bare.ldd"; fail "ld.so --list"; }
  if grep 'not found' "$work/bare.ldd"; then fail "libraries not found without the system's"; fi
  if bare "$program" --version >"$work/bare" 2>&1; then
    bare "$program" info >>"$work/bare" 2>&1 || { cat "$work/bare"; fail "info without the system's libraries"; }
    bare "$program" --log-level warn train --config fashion_mnist.yaml --set "data.root=$data_root" --set device=cpu \
      --set train.epochs=1 --set name=bare >>"$work/bare" 2>&1 ||
      { tail -20 "$work/bare"; fail "training without the system's libraries"; }
    # datasets download through the bundled libcurl, from the tests' local server.
    if [ -f "$data_root/train-images-idx3-ubyte.gz" ]; then
      mkdir -p "$work/served/fashion_mnist"
      ln -s "$data_root"/*.gz "$work/served/fashion_mnist/"
      "$GPUTRAIN_PYTHON" "$GPUTRAIN_ROOT/tests/data/download_server.py" serve "$work/served" "$work/port" \
        "$work/requests" good &
      server=$!
      for _ in $(seq 100); do [ -f "$work/port" ] && break; sleep 0.1; done
      GPUTRAIN_DATASETS_MIRROR="http://127.0.0.1:$(cat "$work/port")" bare "$program" datasets download fashion_mnist \
        --root "$work/downloaded" >>"$work/bare" 2>&1 || { kill "$server"; tail -5 "$work/bare"; fail "datasets download"; }
      kill "$server"
    fi
    step "ran --version, info, one epoch and datasets download with only $(ls "$work/runtime" | tr '\n' ' ')in $libdir"
  else
    cat "$work/bare"
    fail "the program does not start without the system's libraries"
  fi
else
  step "skipped the run without the system's libraries (needs root and unshare)"
fi
step "all passed"
