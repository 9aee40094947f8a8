#!/usr/bin/env bash
# The GPU proof: gputrain's CUDA paths and its claims, each step under its own timeout, grouped into the device
# calls that plan.tsv (beside this script) lays out, each step judged against its floors by summarize.py.
#
#   prove.sh OUTDIR [--call 1|2|kit] [--only REGEX] [--dry-run] [--keep-logs]
#
# --call NAME  the steps plan.tsv lists for call NAME, in this script's order (default kit: every CUDA path once, the
#              kit as it was before issue 57). A step starts only when its expected seconds (plan.tsv) fit in what
#              is left of the call's budget, and is otherwise recorded as "not run": none is cut part-way by the
#              budget, and every step ends before the call's timeout_s less 15 s.
# --only REGEX a bash regex of step names (or PROVE_ONLY): the call's other steps are recorded as not selected; the
#              data steps the selected ones need still run. For a rerun of a failed step.
# --dry-run    the same steps on the CPU with tiny sizes (CI runs it): CUDA-only steps are recorded as skipped
#              with the reason, floors are computed but not enforced (a figure that is missing still fails)
# --keep-logs  also leave the logs in OUTDIR/logs/
#
# Results, rewritten after every step (so a call cut at its limit keeps every step that ended):
# OUTDIR/gpu-<date>-<gpu>-call<NAME>.{json,md} and OUTDIR/logs-call<NAME>.tar.gz: 3 files, no folder (the device
# hands back at most 8 files, 2 folders deep). Exit code: 0 when no step failed, 1 when one did (after writing
# everything), 2 for bad arguments.
#
# Finds gputrain in $GPUTRAIN_BIN, else in the bundle beside this script (bundle.sh's, whose xz-packed binaries it
# unpacks into its work directory first), else in the checkout's build/release.
# shellcheck disable=SC2317  # the internal_* functions run through "internal_$name", before the final exit
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"

# ---- internal sub-commands: compound steps, run as `prove.sh --internal NAME ...` so that
# `timeout` can bound them like any other command --------------------------------------------

# Trains in the background and sends SIGTERM at several moments after training has logged:
# early ones land while cuDNN tunes and compiles kernels for epoch 1's new shapes (the short
# last batch, the test pass), where a library's own signal handlers once turned the stop into
# exit 4 or a segfault. Each stop must exit 130 with the checkpoint its summary line names.
internal_sigterm() {
  local run_dir="$1"; shift
  local delay rc=130 failed=0 i=0
  for delay in 0.05 0.15 0.25 0.5; do
    i=$((i + 1))
    local dir="$run_dir-$i"
    "$@" --set "name=$(basename "$dir")" >"$dir.stdout" &
    local pid=$! waited=0
    # when the step's own timeout ends this shell, the training must not outlive it
    trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
    trap 'exit 124' TERM INT
    # metrics.jsonl appears with the first log interval: training is under way
    while [ ! -s "$dir/metrics.jsonl" ] && [ "$waited" -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do
      sleep 0.02; waited=$((waited + 1))
    done
    sleep "$delay"
    echo "prove: sending SIGTERM to $pid ($delay s after the first log interval)"
    kill -TERM "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" || rc=$?
    trap - EXIT TERM INT
    cat "$dir.stdout"
    echo "prove: exit code $rc"
    local ckpt
    ckpt="$(sed -n 's/.*"stopped":true,"checkpoint":"\([^"]*\)".*/\1/p' "$dir.stdout")"
    if [ "$rc" -eq 130 ] && [ -n "$ckpt" ] && [ -f "$ckpt" ]; then
      echo "prove: stop $i stopped with 130 and the checkpoint $ckpt"
    else
      echo "prove: stop $i failed: exit code $rc, checkpoint '${ckpt}'"; ls -l "$dir/checkpoints" 2>&1 || true
      [ "$failed" -ne 0 ] || failed=$([ "$rc" -eq 130 ] && echo 1 || echo "$rc")
    fi
  done
  if [ "$failed" -eq 0 ]; then
    echo "prove: all $i stops stopped with 130 and their checkpoint"
    return 130
  fi
  return "$failed"
}

# One epoch, then --resume auto for a second one; the resumed run must say so.
internal_resume() {
  local run_dir="$1"; shift
  echo "prove: first run (1 epoch)"
  "$@" --set train.epochs=1
  ls -l "$run_dir/checkpoints"
  echo "prove: resumed run (--resume auto, train.epochs=2)"
  "$@" --resume auto --set train.epochs=2
}

# A run that must stop on a non-finite loss: its exit code passes through, and nothing it
# trained after the loss went NaN may be left as model.pt.
internal_nan_stop() {
  local run_dir="$1"; shift
  local rc=0
  "$@" || rc=$?
  echo "prove: exit code $rc"
  if [ -e "$run_dir/model.pt" ]; then
    echo "prove: $run_dir/model.pt was written by a run that went NaN"
    return 3
  fi
  echo "prove: no model.pt was written"
  return "$rc"
}

# The GPU cases matching FILTER of each GoogleTest binary in turn; fails when any does.
internal_cuda_tests() {
  local filter="$1"; shift
  local rc=0 t
  for t in "$@"; do
    echo "prove: $t"
    "$t" --gtest_color=no --gtest_filter="$filter" || rc=1
  done
  return "$rc"
}

# The generated CIFAR-format set, and an IDX-format Fashion-MNIST stand-in when asked.
internal_make_data() {
  local bin="$1" data="$2" cifar_train="$3" cifar_test="$4" standin="$5" idx_train="$6" idx_test="$7"
  "$bin" datasets make-cifar --out "$data/cifar" --train "$cifar_train" --test "$cifar_test"
  if [ "$standin" = 1 ]; then
    "$bin" datasets make-idx --out "$data/fmnist" --train "$idx_train" --test "$idx_test"
  fi
}

# The on-disk kernel caches gputrain's run-start log names (LibTorch's NVRTC kernels, CUDA's PTX JIT): files and
# KiB in each, before and after the record sweep, so the log shows whether its runs compile any.
kernel_caches() {
  local dir
  for dir in "${PYTORCH_KERNEL_CACHE_PATH:-${XDG_CACHE_HOME:-${HOME:-}/.cache}/torch/kernels}" \
    "${CUDA_CACHE_PATH:-${HOME:-}/.nv/ComputeCache}"; do
    if [ -d "$dir" ]; then
      echo "prove: kernel cache $1: $dir: $(find "$dir" -type f | wc -l) files, $(du -sk "$dir" | cut -f1) KiB"
    else
      echo "prove: kernel cache $1: $dir: absent"
    fi
  done
}

# `gputrain sweep` of the record recipe to 94%, then its record (rewritten by the sweep after every run) and each
# run's metrics.jsonl and run.json copied into OUT, which summarize.py judges and the logs tarball carries: also
# when the step's timeout stops the sweep (it passes the signal to the run, then ends).
internal_record_sweep() {
  local bin="$1" config="$2" runs="$3" out="$4"; shift 4
  mkdir -p "$out"
  kernel_caches "before the sweep"
  keep_record() {
    cp "$runs"/*-sweep.json "$out/sweep.json" 2>/dev/null || true
    local run
    for run in "$runs"/*-sweep-*/; do
      [ -d "$run" ] || continue
      mkdir -p "$out/runs/$(basename "$run")"
      cp "$run/metrics.jsonl" "$run/run.json" "$out/runs/$(basename "$run")/" 2>/dev/null || true
    done
  }
  trap 'keep_record; exit 124' TERM INT
  local rc=0
  "$bin" sweep --config "$config" --set "output.dir=$runs" --set train.target_accuracy=0.94 "$@" || rc=$?
  keep_record
  kernel_caches "after the sweep"
  return "$rc"
}

# A folder of generated JPEGs of 256-500 px (scripts/bench/make_image_folder.py on JOBS processes), each training
# class then hard-linked COPIES more times under other names: every file is still decoded per batch. Made afresh,
# so that a rerun on a warm machine does not nest the links.
internal_make_image_folder() {
  local py="$1" script="$2" root="$3" train="$4" test="$5" jobs="$6" copies="$7" copy class
  rm -rf "$root"
  "$py" "$script" "$root" --train "$train" --test "$test" --jobs "$jobs"
  for copy in $(seq 1 "$copies"); do
    for class in "$root"/train/class???; do cp -al "$class" "${class}_$copy"; done
  done
  echo "prove: $(find "$root/train" -name '*.jpg' | wc -l) training files in $root/train"
}

if [ "${1:-}" = "--internal" ]; then
  name="$2"; shift 2
  "internal_$name" "$@"
  exit $?
fi

# ---- arguments and locations ------------------------------------------------------------------
OUTDIR="" DRY=0 KEEP_LOGS=0 CALL=kit ONLY="${PROVE_ONLY:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --keep-logs) KEEP_LOGS=1 ;;
    --call) CALL="${2:?--call needs 1, 2 or kit}"; shift ;;
    --only) ONLY="${2:?--only needs a regex of step names}"; shift ;;
    -h|--help) sed -n '2,25p' "$SELF"; exit 0 ;;
    -*) echo "prove.sh: unknown option $1" >&2; exit 2 ;;
    *) OUTDIR="$1" ;;
  esac
  shift
done
[ -n "$OUTDIR" ] || { echo "usage: prove.sh OUTDIR [--call 1|2|kit] [--only REGEX] [--dry-run] [--keep-logs]" >&2; exit 2; }
PLAN="$HERE/plan.tsv"
CALL_BUDGET="" CALL_TIMEOUT=""
declare -A PLANNED=()
while IFS=$'\t' read -r row a b c _; do
  case "$row" in
    call) [ "$a" = "$CALL" ] && { CALL_BUDGET="$b"; CALL_TIMEOUT="$c"; } ;;
    step) [ "$b" = "$CALL" ] && PLANNED[$a]="$c" ;;
  esac
done <"$PLAN"
[ -n "$CALL_BUDGET" ] || { echo "prove.sh: --call $CALL: $PLAN has no such call" >&2; exit 2; }
mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
START=$EPOCHREALTIME

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gputrain-prove.XXXXXX")"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1  # the bundle stays as it came; logs as they happen
# Everything a step leaves that the report needs is in OUTDIR's tarball, rewritten after every step.
trap 'rm -rf "$WORK"' EXIT
BIN=""
if [ -f "$HERE/configs/cifar10.yaml" ]; then  # the bundle: everything beside this script
  ROOT="$HERE"
  # bundle.sh xz-packs the binaries and libraries (so that the bundle fits the device's 64 MiB with the real
  # Fashion-MNIST): unpacked into the work directory, the bundle left as it came. nvJPEG (data.decode: gpu)
  # among them: gputrain looks in LD_LIBRARY_PATH's lib/ when torch's install has none.
  python3 - "$HERE" "$WORK/bundle" <<'PY'
import glob, lzma, os, sys
bundle, into = sys.argv[1], sys.argv[2]
for packed in glob.glob(os.path.join(bundle, "*.xz")) + glob.glob(os.path.join(bundle, "*", "*.xz")):
    plain = os.path.join(into, os.path.relpath(packed, bundle)[:-3])
    os.makedirs(os.path.dirname(plain), exist_ok=True)
    with open(packed, "rb") as f, open(plain, "wb") as out:
        out.write(lzma.decompress(f.read()))
    os.chmod(plain, os.stat(packed).st_mode)
PY
  TESTS_DIR="$WORK/bundle/tests"
  BIN="${GPUTRAIN_BIN:-$WORK/bundle/gputrain}"
  # The binaries' RUNPATH names the build machine's venv: LibTorch comes from this machine's torch install.
  torch_lib="$(python3 -c 'import importlib.util as u, os; print(os.path.join(u.find_spec("torch").submodule_search_locations[0], "lib"))' 2>/dev/null || true)"
  export LD_LIBRARY_PATH="${torch_lib:+$torch_lib:}$WORK/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else                                           # the checkout: scripts/gpu/
  ROOT="$(cd "$HERE/../.." && pwd)"
  TESTS_DIR="$ROOT/build/release/tests"
fi
BENCH="$ROOT/scripts/bench"
BIN="${BIN:-${GPUTRAIN_BIN:-$ROOT/build/release/app/gputrain}}"
[ -x "$BIN" ] || { echo "prove.sh: no gputrain binary at $BIN (set GPUTRAIN_BIN)" >&2; exit 2; }
CONFIGS="$ROOT/configs"

# The Python with torch (the races' PyTorch side, the harness): GPUTRAIN_PYTHON, else python3 where it has torch,
# else the project's venv.
PY="${GPUTRAIN_PYTHON:-}"
for candidate in python3 "${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/gputrain/venv/bin/python"; do
  [ -n "$PY" ] && break
  if "$candidate" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' >/dev/null 2>&1; then
    PY="$(command -v "$candidate")"
  fi
done

LOGS="$WORK/logs"
RUNS="$WORK/runs"
DATA="$WORK/data"
mkdir -p "$LOGS" "$RUNS" "$DATA"
: >"$WORK/steps.tsv"
if ! command -v git >/dev/null; then
  # the benchmarks ask git for the commit; a bare GPU machine may have none (the bundle's BUNDLE.txt names it)
  mkdir -p "$WORK/bin"
  printf '#!/bin/sh\nexit 1\n' >"$WORK/bin/git"
  chmod +x "$WORK/bin/git"
  export PATH="$PATH:$WORK/bin"
fi

# The budget: the call's, or PROVE_BUDGET_S; on the CPU the dry run's sizes take their own time, so its budget
# only keeps a stuck run from hanging CI. Every step ends HARD seconds after the start at the latest.
if [ "$DRY" = 1 ]; then BUDGET=${PROVE_BUDGET_S:-900}; else BUDGET=${PROVE_BUDGET_S:-$CALL_BUDGET}; fi
HARD=$(awk "BEGIN { print ($DRY == 1 ? $BUDGET + 60 : ($CALL_TIMEOUT - 15 > $BUDGET ? $CALL_TIMEOUT - 15 : $BUDGET)) }")
elapsed() { awk "BEGIN { printf \"%.1f\", $EPOCHREALTIME - $START }"; }

# The report's file names, fixed now: later steps must rewrite the same files.
if [ "$DRY" = 1 ]; then
  GPU=cpu-dry-run
else
  GPU="$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
fi
SLUG="$(printf '%s' "${GPU:-no-gpu}" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')"
STEM="$OUTDIR/gpu-$(date -u +%Y-%m-%d)-${SLUG:-gpu}-call$CALL"
TARBALL="$OUTDIR/logs-call$CALL.tar.gz"
VERSION="$("$BIN" --version 2>/dev/null || true)"

# ---- sizes and shared arguments ---------------------------------------------------------------
if [ "$DRY" = 1 ]; then
  DEV=cpu; EPOCHS=1; CIFAR_TRAIN=128; CIFAR_TEST=64; IDX_TRAIN=128; IDX_TEST=64; T=60
  SIZE=(--set data.batch_size=32 --set train.log_every=1)
  # call 2's races run the record network's batch of 1000 (all of these) through the reference's warm-up too: a
  # step takes seconds on a CPU
  [ "$CALL" = 2 ] && IDX_TRAIN=32 IDX_TEST=32
else
  DEV=cuda; EPOCHS=2; CIFAR_TRAIN=10000; CIFAR_TEST=2000; IDX_TRAIN=10000; IDX_TEST=2000; T=120
  SIZE=(--set train.log_every=10)
  # call 2's CIFAR set is the race's: 50,000 images, as the recipe's CIFAR-10
  [ "$CALL" = 2 ] && CIFAR_TRAIN=50000
fi
# The real Fashion-MNIST: the bundle's copy (bundle.sh packs it where the build machine has it), else the system's.
FMNIST=/usr/share/datasets/fashion-mnist
[ -e "$HERE/fashion-mnist/train-images-idx3-ubyte.gz" ] && FMNIST="$HERE/fashion-mnist"
STANDIN=0
if [ "$DRY" = 1 ] || { [ ! -e "$FMNIST/train-images-idx3-ubyte.gz" ] && [ ! -e "$FMNIST/train-images-idx3-ubyte" ]; }
then
  # the real set is absent (or too big for a dry run): an IDX-format stand-in
  FMNIST="$DATA/fmnist"
  STANDIN=1
fi

# ---- the step runner --------------------------------------------------------------------------
# step NAME KIND TIMEOUT EXPECT_RC REGEX -- COMMAND...
#   KIND: any (runs in both modes) or cuda (skipped in --dry-run)
#   REGEX: a Python regex the log must match ('' for none)
# A step plan.tsv does not list for this call is no part of it. Appends one tab-separated record to steps.tsv, then
# rewrites the report (summarize.py turns the records, logs and figures into it) and the logs tarball.
record() {  # name kind status reason rc wall expect_rc regex command
  local IFS=$'\t'
  printf '%s\n' "$*" >>"$WORK/steps.tsv"
}

report() {  # [--final]: summarize.py's exit code then says whether a step failed
  local rc=0
  python3 "$HERE/summarize.py" --steps "$WORK/steps.tsv" --logs "$LOGS" --stem "$STEM" --plan "$PLAN" --call "$CALL" \
    --budget "$BUDGET" --dry-run "$DRY" --real-fmnist "$((1 - STANDIN))" --binary "$BIN" --version "$VERSION" \
    --gpu "${GPU:-}" --elapsed "$(elapsed)" "$@" >"$WORK/report.out" 2>&1 || rc=$?
  tar -czf "$TARBALL.part" -C "$WORK" logs && mv -f "$TARBALL.part" "$TARBALL"
  return "$rc"
}

planned() { [ -n "${PLANNED[$1]+set}" ]; }

selected() {  # NAME: selected by --only; a data step is when a step that needs it is
  [ -z "$ONLY" ] && return 0
  case "$1" in
    make_data) return 0 ;;
    make_speed_data) set -- speed_floors ;;
    make_image_folder) selected resnet50_folder_race || selected vit_race; return ;;
  esac
  [[ "$1" =~ ^($ONLY)$ ]]
}

step() {
  local name="$1" kind="$2" limit="$3" expect="$4" regex="$5"
  shift 6  # the '--' too
  planned "$name" || return 0
  local cmd
  cmd="$(printf '%q ' "$@")"
  if ! selected "$name"; then
    record "$name" "$kind" skipped "not selected (--only $ONLY)" "" 0 "$expect" "$regex" "$cmd"
    report || true
    return 0
  fi
  if [ "$DRY" = 1 ] && [ "$kind" = cuda ]; then
    record "$name" "$kind" skipped "needs a CUDA GPU (dry run on the CPU)" "" 0 "$expect" "$regex" "$cmd"
    echo "prove: $name skipped (needs a CUDA GPU)" >&2
    report || true
    return 0
  fi
  local expected="${PLANNED[$name]}" left hard_left
  left=$(awk "BEGIN { printf \"%.1f\", $BUDGET - ($EPOCHREALTIME - $START) }")
  if awk "BEGIN { exit !($expected > $left) }"; then
    record "$name" "$kind" "not run" "expected $expected s, $left s of the ${BUDGET} s budget left" "" 0 "$expect" \
      "$regex" "$cmd"
    echo "prove: $name not run (expected $expected s, $left s left)" >&2
    report || true
    return 0
  fi
  hard_left=$(awk "BEGIN { printf \"%d\", $HARD - ($EPOCHREALTIME - $START) }")
  [ "$limit" -le "$hard_left" ] || limit=$hard_left
  [ "$limit" -ge 1 ] || limit=1
  echo "prove: $name ... (expected $expected s, limit $limit s)" >&2
  local t0 t1 rc=0
  t0=$EPOCHREALTIME
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1 </dev/null || rc=$?
  t1=$EPOCHREALTIME
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "prove: timed out after $limit s" >>"$LOGS/$name.log"
  record "$name" "$kind" ran "" "$rc" "$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")" \
    "$expect" "$regex" "$cmd"
  echo "prove: $name exit $rc" >&2
  report || true
}

skip() {  # NAME REASON: a step this machine cannot run at all
  planned "$1" || return 0
  record "$1" any skipped "$2" "" 0 0 "" ""
  echo "prove: $1 skipped ($2)" >&2
  report || true
}

# cifar_cmd NAME [ARGS...]: CMD becomes the seed CIFAR-10 recipe on the generated set, in its
# own run directory (an array, so that paths with spaces survive)
cifar_cmd() {
  local name="$1"; shift
  CMD=("$BIN" train --config "$CONFIGS/cifar10.yaml" --output "$RUNS" --set "name=$name" --set "device=$DEV"
       --set "data.root=$DATA/cifar" --set "train.epochs=$EPOCHS" "${SIZE[@]}" "$@")
}

# ---- the steps, in the order of evidence per second within each call --------------------------
# First, as a step: a binary that cannot start (a library missing) shows in the report.
step make_data any 120 0 'wrote' -- "$BASH" "$SELF" --internal make_data "$BIN" "$DATA" "$CIFAR_TRAIN" "$CIFAR_TEST" \
  "$STANDIN" "$IDX_TRAIN" "$IDX_TEST"
step nvidia_smi cuda 30 0 'GPU 0' -- bash -c \
  'nvidia-smi -L && nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv'
step info any 60 0 'CUDA available' -- "$BIN" info
step info_json any 60 0 '^\{' -- "$BIN" info --json
step info_json_visible0 any 60 0 '^\{' -- env CUDA_VISIBLE_DEVICES=0 "$BIN" info --json

cifar_cmd invalid_gpu_device --set device=cuda:7
step invalid_gpu_device any 60 2 'cuda:7' -- "${CMD[@]}"
cifar_cmd invalid_gpu_index --set device=cuda --set 'gpus=[7]'
step invalid_gpu_index cuda 60 2 '' -- "${CMD[@]}"

# The bundle holds exactly the binaries with *_CUDA tests (bundle.sh asks CTest); in a checkout every test binary
# runs its *_CUDA cases, if any (CTest's list would start each binary to discover its tests).
cuda_tests=()
for t in "$TESTS_DIR"/*; do [ -f "$t" ] && [ -x "$t" ] && cuda_tests+=("$t"); done
# nvjpeg_decode runs the NvjpegCuda cases as its own row (with their figures): not twice.
CUDA_FILTER='*_CUDA'
planned nvjpeg_decode && selected nvjpeg_decode && CUDA_FILTER='*_CUDA:-NvjpegCuda.*'
if [ "$DRY" = 0 ] && [ "${#cuda_tests[@]}" -eq 0 ]; then
  skip cuda_tests "no CUDA test binaries in $TESTS_DIR"
else
  step cuda_tests cuda 240 0 'PASSED' -- "$BASH" "$SELF" --internal cuda_tests "$CUDA_FILTER" "${cuda_tests[@]}"
fi

# The record (issue 39): configs/fashion_mnist_record.yaml to 94% over seeds 0-9 on the real Fashion-MNIST, under
# `gputrain sweep`, which times each run's process; summarize.py judges the mean accuracy, each run's end-to-end
# time and the GPU time to 94% and to 93% (from each run's metrics.jsonl).
RECORD=(--seeds 0..9 --set "data.root=$FMNIST" --set "device=$DEV")
[ "$DRY" = 1 ] && RECORD=(--seeds 0 --set "data.root=$FMNIST" --set device=cpu --set train.epochs=2 "${SIZE[@]}")
step record_sweep any 150 0 '' -- "$BASH" "$SELF" --internal record_sweep "$BIN" "$CONFIGS/fashion_mnist_record.yaml" \
  "$RUNS/record" "$LOGS/record_sweep" "${RECORD[@]}"

# Fine-tuning (issue 40): the fast recipe on five classes, then configs/fashion_mnist_finetune.yaml
# from its model.pt with the body frozen. On the GPU the step must run in the CUDA graph although
# most parameters hold no gradient, and under ddp (NCCL, one process) the frozen ones stay out of
# the gradients' sum.
step finetune_base any "$T" 0 'Test set: ' -- "$BIN" train --config "$CONFIGS/fashion_mnist_fast.yaml" \
  --output "$RUNS" --set name=finetune_base --set "device=$DEV" --set "data.root=$FMNIST" \
  --set "train.epochs=$EPOCHS" --set train.target_accuracy=0 --set 'data.keep_classes=[0,1,2,3,4]' "${SIZE[@]}"
FINETUNE=("$BIN" train --config "$CONFIGS/fashion_mnist_finetune.yaml" --output "$RUNS" --set "device=$DEV"
          --set "data.root=$FMNIST" --set "train.epochs=$EPOCHS" --set "model.init_from=$RUNS/finetune_base/model.pt"
          "${SIZE[@]}")
step finetune_frozen any "$T" 0 '(?s)model\.freeze_batchnorm: eval.*Test set: ' -- \
  "${FINETUNE[@]}" --set name=finetune_frozen
step finetune_frozen_ddp any "$T" 0 '(?s)Test set: ' -- \
  env NCCL_DEBUG=WARN "${FINETUNE[@]:0:2}" --nproc 1 "${FINETUNE[@]:2}" --set name=finetune_frozen_ddp --set strategy=ddp

# data.decode: gpu (issue 41): nvJPEG's batched decode of generated JPEGs against libjpeg-turbo's
# decode of the same files (each comparison's mean and largest difference are in the log).
step nvjpeg_decode cuda 120 0 'PASSED' -- "$TESTS_DIR/data_tests" --gtest_color=no --gtest_filter='NvjpegCuda.*'
# The generated CIFAR set as JPEG class folders, read per batch (cache none), its JPEGs decoded by nvJPEG and
# augmented on the GPU; the log says the loader chose it.
step export_jpeg any 120 0 '' -- "$BIN" datasets export --config "$CONFIGS/cifar10.yaml" \
  --set "data.root=$DATA/cifar" --out "$DATA/jpegs" --format jpeg
cifar_cmd image_folder_decode_gpu --set data.dataset=image_folder --set "data.root=$DATA/jpegs" \
  --set data.cache=none --set data.decode=gpu --set data.num_workers=4 --set data.augment.hflip=true \
  --set data.augment.random_crop=4
step image_folder_decode_gpu cuda "$T" 0 '(?s)data\.decode: gpu for .*Test set: ' -- "${CMD[@]}"

# A profile on request (issue 60): the run's own step recorded by LibTorch's profiler (Kineto, with the CUDA
# kernels on a GPU) for 3 steps after the timed ones; the trace goes back in the logs tarball.
step bench_profile any 120 0 '"profile":' -- "$BIN" bench --config "$CONFIGS/cifar10.yaml" --json --steps 5 \
  --warmup 2 --profile 3 --profile-trace "$LOGS/bench_profile_trace.json" --set "device=$DEV" \
  --set "data.root=$DATA/cifar" "${SIZE[@]}"

# ResNet-50 (call 1) and ViT-B/16 (call 2, issue 58) trained from a JPEG folder (issue 41): gputrain from the
# folder and on resident tensors against torchvision's resnet50 / vit_b_16 with DataLoader, bf16, channels-last,
# the config's fused optimizer, compile none (train_race.py).
FOLDER="$DATA/jpeg-folder"
if [ "$DRY" = 1 ]; then
  FOLDER_SIZES=(16 4 1 0)
  TRAIN_RACE=(--batch 4 --size 32 --steps 2 --warmup 1 --workers 0)
elif [ "$CALL" = 2 ]; then
  FOLDER_SIZES=(200 32 16 7)   # 200 generated, 1600 with the links: 12 batches of 128 an epoch
  TRAIN_RACE=(--batch 128 --steps 30 --warmup 5 --workers 12)
else
  FOLDER_SIZES=(800 64 16 7)   # 800 generated, 6400 with the links: 50 batches of 128 an epoch
  TRAIN_RACE=(--batch 128 --steps 100 --warmup 10 --workers 12)
fi
if [ -z "$PY" ] || ! "$PY" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torchvision") is None)' 2>/dev/null
then
  skip make_image_folder "no Python with torch and torchvision here (${PY:-none})"
  skip resnet50_folder_race "no Python with torch and torchvision here (${PY:-none})"
  skip vit_race "no Python with torch and torchvision here (${PY:-none})"
else
  step make_image_folder any 120 0 'training files' -- "$BASH" "$SELF" --internal make_image_folder "$PY" \
    "$BENCH/make_image_folder.py" "$FOLDER" "${FOLDER_SIZES[@]}"
  step resnet50_folder_race any 150 0 '' -- "$PY" "$BENCH/train_race.py" --root "$FOLDER" --device "$DEV" \
    --models resnet50 --compile none --gputrain "$BIN" --configs "$CONFIGS" --out "$LOGS/resnet50_folder_race" \
    "${TRAIN_RACE[@]}"
  VIT_RACE=(step vit_race any 120 0 '' -- "$PY" "$BENCH/train_race.py" --root "$FOLDER" --device "$DEV"
            --models vit_b_16 --compile none --gputrain "$BIN" --configs "$CONFIGS" --out "$LOGS/vit_race"
            "${TRAIN_RACE[@]}")
fi

# Speed floors (issue 36): every configuration a user turns on against the graphed fp32 step
# of this same call, from at least 2 s of steady state each (scripts/gpu/speed.py). On the GPU a
# 50,000-image set, so that an epoch outlasts the graph's warm-up; the dry run checks the plumbing.
SPEED_DATA="$DATA/cifar50k"
step make_speed_data cuda 120 0 'wrote' -- "$BIN" datasets make-cifar --out "$SPEED_DATA" --train 50000 --test 2000
[ "$DRY" = 0 ] || SPEED_DATA="$DATA/cifar"
SPEED=(python3 "$HERE/speed.py" --bin "$BIN" --configs "$CONFIGS" --data "$SPEED_DATA" --fmnist "$FMNIST"
       --runs "$RUNS/speed" --out "$LOGS/speed.json" --device "$DEV")
[ "$DRY" = 1 ] && SPEED+=(--dry-run)
step speed_floors any 300 0 '(?s)\| fp32_graph \|.*\| tta_net_bf16 \|' -- "${SPEED[@]}"

# The races against PyTorch at its best (issue 39, call 2): reference_best.py under
# torch.compile(mode="reduce-overhead") (CUDA graphs without max-autotune's search, which did not finish in 300 s),
# 2 seeds each side, so that the reference's second run finds Inductor's cache warm; race.py writes its md and json
# after every run. PROVE_RACE_COMPILE names another mode (max-autotune only where its cache is already warm).
RACE=("$PY" "$BENCH/race.py" --device "$DEV" --gputrain "$BIN" --configs "$CONFIGS" --python "$PY" --fmnist "$FMNIST"
      --cifar "$DATA/cifar" --seeds '' --tag "$SLUG")
if [ "$DRY" = 1 ]; then
  RACE+=(--compile "${PROVE_RACE_COMPILE:-none}" --record-epochs 2 --record-target 0 --cifar-epochs 2)
  RACE_SEEDS=0
else
  RACE+=(--compile "${PROVE_RACE_COMPILE:-reduce-overhead}")
  RACE_SEEDS=0..1
fi
if [ -z "$PY" ]; then
  skip race_record "no Python with torch here"
  skip race_cifar "no Python with torch here"
else
  step race_record any 150 0 '' -- "${RACE[@]}" --record-seeds "$RACE_SEEDS" --cifar-seeds '' --run-timeout 110 \
    --budget-s 135 --out "$LOGS/race_record" --logs "$LOGS/race_record/logs"
  step race_cifar any 130 0 '' -- "${RACE[@]}" --record-seeds '' --cifar-seeds "$RACE_SEEDS" --run-timeout 90 \
    --budget-s 115 --out "$LOGS/race_cifar" --logs "$LOGS/race_cifar/logs"
fi
# After the races, on the folder made above: ViT-B/16's step against torchvision's (issue 58).
[ -z "${VIT_RACE+set}" ] || "${VIT_RACE[@]}"

# ---- the rest of the kit (--call kit) ---------------------------------------------------------
# A run that goes NaN (a learning rate of 1e12) with train.on_nan: stop, on the default path (the
# CUDA graph on a GPU): it must stop with exit 1 naming the steps, and write no model.pt.
cifar_cmd nan_stop --set optim.lr=1e12 --set train.on_nan=stop
step nan_stop any "$T" 1 '(?s)not finite.*prove: no model\.pt was written' -- \
  "$BASH" "$SELF" --internal nan_stop "$RUNS/nan_stop" "${CMD[@]}"

cifar_cmd cifar_seed
step cifar_seed any "$T" 0 'Test set: ' -- "${CMD[@]}"
step fmnist_cnn any "$T" 0 'Test set: ' -- "$BIN" train --config "$CONFIGS/fashion_mnist_cnn.yaml" \
  --output "$RUNS" --set name=fmnist_cnn --set "device=$DEV" --set "data.root=$FMNIST" \
  --set "train.epochs=$EPOCHS" "${SIZE[@]}"

for amp in off bf16 fp16; do
  kind=any; [ "$amp" = fp16 ] && kind=cuda  # fp16 autocast is CUDA-only
  cifar_cmd "amp_$amp" --set "train.amp=$amp"
  step "amp_$amp" "$kind" "$T" 0 'Test set: ' -- "${CMD[@]}"
done
# Inputs scaled by 1e6 exceed fp16's range (65504) inside autocast: every step's gradients
# are inf/NaN and the scaler must skip them rather than stop the run. One epoch: each skip
# halves the loss scale, and 2^16 halved ~150 times nears float32's smallest number.
cifar_cmd amp_fp16_overflow --set train.amp=fp16 --set 'data.normalize.std=[1e-6,1e-6,1e-6]' --set train.epochs=1
# Eager steps warn per skipped step ("step skipped"); under the CUDA graph the device counter is read at the
# epoch's end ("79 steps skipped").
step amp_fp16_overflow cuda "$T" 0 'steps? skipped' -- "${CMD[@]}"

for pin in false true; do
  for workers in 0 4; do
    name="loader_pin_${pin}_workers_$workers"
    cifar_cmd "$name" --set "data.pin_memory=$pin" --set "data.num_workers=$workers"
    step "$name" any "$T" 0 'Test set: ' -- "${CMD[@]}"
  done
done

if [ "$DRY" = 1 ]; then
  cifar_cmd dp_gpu0 --set strategy=dp --set dp.replicas=2   # CPU replica threads instead
else
  cifar_cmd dp_gpu0 --set strategy=dp --set 'gpus=[0]'
fi
step dp_gpu0 any "$T" 0 'Test set: ' -- "${CMD[@]}"
cifar_cmd ddp_nproc1 --set strategy=ddp
# NCCL_DEBUG=WARN: NCCL says itself why it refuses, if it does. On the GPU the step is captured
# in the CUDA graph with its gradients' all-reduce over NCCL; on the CPU (Gloo) c10d's Reducer
# sums them during backward.
step ddp_nproc1 any "$T" 0 "(?s)(the step sums .* of gradients after backward, .*captured with the step in its CUDA graph|c10d's Reducer all-reduces ).*Test set: " -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 1 "${CMD[@]:2}"
# The eager ddp step: c10d's Reducer over NCCL at world size 1, its buckets and its own timing
# of backward and the all-reduce logged.
cifar_cmd ddp_nproc1_reducer --set strategy=ddp --set train.cuda_graph=false
step ddp_nproc1_reducer any "$T" 0 "(?s)c10d's Reducer all-reduces .*Test set: .*Reducer timing" -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 1 "${CMD[@]:2}"
# Two ranks on one GPU: NCCL may refuse (duplicate GPU); summarize.py records its words.
cifar_cmd ddp_nproc2 --set strategy=ddp --set 'gpus=[0]'
[ "$DRY" = 1 ] && cifar_cmd ddp_nproc2 --set strategy=ddp
step ddp_nproc2 any "$T" 0 'Test set: ' -- env NCCL_DEBUG=WARN "${CMD[@]:0:2}" --nproc 2 "${CMD[@]:2}"

if [ "$DRY" = 0 ] && planned nccl_across_gpus && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -lt 2 ]; then
  skip nccl_across_gpus "not run: this machine has one GPU (NCCL between GPUs and multi-GPU dp need two)"
fi

# Two ranks on one GPU over Gloo (which, unlike NCCL, allows it): c10d's Reducer on CUDA
# gradients with bucket views, and batchnorm statistics summed across the ranks.
step ddp_gloo_sync_batchnorm any "$T" 0 "(?s)normalise with the global batch's statistics.*c10d's Reducer all-reduces .*Test set: " -- \
  "$BIN" train --config "$CONFIGS/fashion_mnist_resnet.yaml" --nproc 2 --output "$RUNS" --set name=ddp_gloo_sync_batchnorm \
  --set "device=$DEV" --set "data.root=$FMNIST" --set train.epochs=1 --set strategy=ddp --set ddp.backend=gloo \
  --set model.sync_batchnorm=true --set ddp.gradient_as_bucket_view=true "${SIZE[@]}"

# Your own images: the generated CIFAR set written as PNG class folders, then read back by
# image_folder, decoded at start (cache memory) and in the loader's workers (cache none).
step export_png any 120 0 '' -- "$BIN" datasets export --config "$CONFIGS/cifar10.yaml" \
  --set "data.root=$DATA/cifar" --out "$DATA/images" --format png
for cache in memory none; do
  cifar_cmd "image_folder_$cache" --set data.dataset=image_folder --set "data.root=$DATA/images" \
    --set "data.cache=$cache" --set data.num_workers=4
  step "image_folder_$cache" any "$T" 0 'Test set: ' -- "${CMD[@]}"
done

cifar_cmd resume
step checkpoint_resume any "$T" 0 '(?s)resuming from .*"epochs":2,' -- "$BASH" "$SELF" --internal resume "$RUNS/resume" "${CMD[@]}"
# Many epochs so that the signal lands mid-run; the stop itself must write the checkpoint.
cifar_cmd sigterm --set train.epochs=100000
step sigterm any "$T" 130 'all \d+ stops stopped with 130 and their checkpoint' -- \
  "$BASH" "$SELF" --internal sigterm "$RUNS/sigterm" "${CMD[@]}"
# One hidden layer of 4M units at batch 100 000: its activations alone need 1.6 TB.
step oom cuda "$T" 1 'ran out of memory' -- "$BIN" train --config "$CONFIGS/seed_mlp.yaml" --output "$RUNS" \
  --set name=oom --set device=cuda --set train.epochs=1 --set data.samples=100000 --set data.batch_size=100000 \
  --set 'model.hidden=[4000000]'

# Fast paths: each against the same baseline with all of them explicitly off.
OFF=(--set data.device_cache=false --set train.cuda_graph=false --set train.channels_last=false
     --set train.cudnn_benchmark=false --set optim.fused=false)
cifar_cmd fast_baseline "${OFF[@]}"
step fast_baseline any "$T" 0 'Test set: ' -- "${CMD[@]}"
# The defaults: every fast path on auto, each decision logged with its reason.
cifar_cmd fast_auto
step fast_auto any "$T" 0 '(?s)optim\.fused: \w+ \(auto: .*train\.cudnn_benchmark: \w+ \(auto: .*Test set: ' -- "${CMD[@]}"
for on in data.device_cache train.channels_last train.cudnn_benchmark optim.fused; do
  name="fast_${on#*.}"
  cifar_cmd "$name" "${OFF[@]}" --set "$on=true"
  step "$name" any "$T" 0 'Test set: ' -- "${CMD[@]}"
done
# CUDA graphs need the fused optimizer and batches of one shape: off and on with those.
for graph in false true; do
  cifar_cmd "fast_cuda_graph_$graph" "${OFF[@]}" --set optim.fused=true --set data.drop_last=true \
    --set "train.cuda_graph=$graph"
  step "fast_cuda_graph_$graph" cuda "$T" 0 'Test set: ' -- "${CMD[@]}"
done
for precision in highest high; do
  cifar_cmd "fast_matmul_$precision" "${OFF[@]}" --set "train.matmul_precision=$precision"
  step "fast_matmul_$precision" any "$T" 0 "matmul_precision: $precision" -- "${CMD[@]}"
done

# The harness against the Python reference: one repetition, short. Its flags are checked in
# both modes (run.py --help needs no torch), so that a renamed flag shows in the dry run.
HARNESS_FLAGS=(--device --workloads --reps --epochs --gputrain --python --data-dir --out)
flags_regex="(?s)$(printf '(?=.*%s )' "${HARNESS_FLAGS[@]}")"
step bench_harness_flags any 60 0 "$flags_regex" -- python3 "$BENCH/run.py" --help
if [ "$DRY" = 1 ] && [ "${PROVE_DRY_HARNESS:-0}" != 1 ]; then
  # On 2 shared cores even the seed MLP's run takes 40-150 s: too slow for the suite.
  skip bench_harness "dry run: the CPU harness takes minutes here (PROVE_DRY_HARNESS=1 runs it on the seed MLP)"
elif [ -z "$PY" ]; then
  skip bench_harness "no python3 with torch on this machine"
else
  if [ "$DRY" = 1 ]; then
    # the CNN workloads take minutes on a CPU: the seed MLP alone, once
    HARNESS=(--device cpu --workloads seed_mlp --reps 1 --epochs 1)
  else
    workloads=cifar_cnn,seed_mlp
    [ "$STANDIN" = 0 ] && workloads=cifar_cnn,fmnist_cnn,seed_mlp
    HARNESS=(--device cuda --workloads "$workloads" --reps 1 --epochs 2)
  fi
  step bench_harness any 300 0 '^\| \w+ \| gputrain \|' -- "$PY" "$BENCH/run.py" "${HARNESS[@]}" --gputrain "$BIN" \
    --python "$PY" --data-dir "$WORK/bench-data" --out "$LOGS/bench"
fi

# ---- the report -------------------------------------------------------------------------------
rc=0
report --final || rc=$?
cat "$WORK/report.out" >&2
if [ "$KEEP_LOGS" = 1 ]; then
  rm -rf "$OUTDIR/logs"
  cp -r "$LOGS" "$OUTDIR/logs"
fi
echo "prove: call $CALL done in $(elapsed) s; results in $OUTDIR" >&2
exit "$rc"
