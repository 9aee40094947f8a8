#!/usr/bin/env bash
# Soak run (not a test): trains the seed MLP (configs/seed_mlp.yaml, synthetic data)
# with several loader workers for a long stretch and samples the process's memory
# (/proc/<pid>/status: VmRSS now, VmHWM the peak so far) at intervals. Memory must
# stay flat once warmed up: exits 1 when RSS at the end exceeds RSS at the end of
# warm-up by more than 5% (and 4 MiB). Writes scripts/bench/results/soak-<date>.md.
#   scripts/soak.sh [SECONDS=600] [INTERVAL=30] [WORKERS=3] [WARMUP=60]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
seconds="${1:-600}" interval="${2:-30}" workers="${3:-3}" warmup="${4:-60}"
"$GPUTRAIN_ROOT/scripts/build.sh" release gputrain >/dev/null
cd "$GPUTRAIN_ROOT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Epochs far beyond what fits in the time: the run is stopped, it never ends by itself.
build/release/app/gputrain train --config configs/seed_mlp.yaml --output "$work/runs" \
  --set data.num_workers="$workers" --set train.epochs=100000000 >/dev/null 2>"$work/stderr" &
pid=$!
metrics="$work/runs/seed-mlp/metrics.jsonl"

kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$pid/status"; }
rows=() start=$SECONDS warm_rss="" rss=0
while [ $((SECONDS - start)) -lt "$seconds" ]; do
  sleep "$interval"
  kill -0 "$pid" 2>/dev/null || { cat "$work/stderr" >&2; echo "soak: gputrain stopped early" >&2; exit 1; }
  t=$((SECONDS - start)) rss=$(kib VmRSS) hwm=$(kib VmHWM) threads=$(kib Threads)
  epochs=$(grep -c '"split":"test"' "$metrics" || true)
  [ -z "$warm_rss" ] && [ "$t" -ge "$warmup" ] && warm_rss=$rss
  rows+=("| $t | $epochs | $((rss / 1024)).$(((rss % 1024) * 10 / 1024)) | $((hwm / 1024)).$(((hwm % 1024) * 10 / 1024)) | $threads |")
  echo "soak: ${t}s, epoch $epochs, RSS $((rss / 1024)) MiB, peak $((hwm / 1024)) MiB" >&2
done
# SIGINT as a user would stop it; SIGKILL if it has not ended 30 s later.
kill -INT "$pid" 2>/dev/null || true
for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
kill -KILL "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true

growth_kib=$((rss - warm_rss))
limit_kib=$((warm_rss / 20 > 4096 ? warm_rss / 20 : 4096))
verdict="flat: RSS changed by $growth_kib KiB after warm-up (limit $limit_kib KiB)"
status=0
[ "$growth_kib" -gt "$limit_kib" ] && { verdict="GROWING: RSS rose by $growth_kib KiB after warm-up (limit $limit_kib KiB)"; status=1; }
report="scripts/bench/results/soak-$(date +%Y-%m-%d).md"
{
  echo "# Soak run, $(date +%Y-%m-%d)"
  echo
  echo "\`scripts/soak.sh $seconds $interval $workers $warmup\`: configs/seed_mlp.yaml with"
  echo "data.num_workers=$workers, trained for ${seconds} s on $(nproc) cores ($(uname -m)), no GPU;"
  echo "memory sampled every ${interval} s from /proc/<pid>/status (VmRSS, VmHWM = peak RSS so far)."
  echo "$(build/release/app/gputrain --version)"
  echo
  echo "| seconds | epochs done | RSS MiB | peak RSS MiB | threads |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Warm-up: the first ${warmup} s. Result: $verdict."
} >"$report"
cat "$report"
exit $status
