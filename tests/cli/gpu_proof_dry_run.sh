#!/usr/bin/env bash
# scripts/gpu/prove.sh --dry-run, checked: the GPU proof kit must not rot between GPU runs.
# Needs GPUTRAIN_BIN (CTest passes $<TARGET_FILE:gputrain>).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mktemp -d "${TMPDIR:-/tmp}/gputrain-prove-test.XXXXXX")"
trap 'rm -rf "$out"' EXIT
: "${GPUTRAIN_BIN:?set GPUTRAIN_BIN to the gputrain binary}"

rc=0
"$root/scripts/gpu/prove.sh" "$out" --dry-run || rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: prove.sh --dry-run exited with $rc"; exit 1; }

python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
md, js = glob.glob(f"{out}/gpu-*-cpu-dry-run.md"), glob.glob(f"{out}/gpu-*-cpu-dry-run.json")
problems = []
if len(md) != 1 or len(js) != 1:
    sys.exit(f"FAIL: expected one gpu-<date>-cpu-dry-run .md and .json in {out}, found {md} {js}")
if not glob.glob(f"{out}/logs.tar.gz"):
    problems.append("no logs.tar.gz")
report = json.load(open(js[0]))
steps = {s["name"]: s for s in report["steps"]}
# Every step of the kit; the CUDA-only ones must be skipped with a reason in a dry run.
cuda_only = ["nvidia_smi", "invalid_gpu_index", "cuda_tests", "make_speed_data", "amp_fp16", "amp_fp16_overflow", "oom",
             "fast_cuda_graph_false", "fast_cuda_graph_true", "export_jpeg", "image_folder_decode_gpu"]
on_cpu = ["make_data", "info", "info_json", "info_json_visible0", "invalid_gpu_device", "cifar_seed", "fmnist_cnn", "amp_off",
          "amp_bf16", "loader_pin_false_workers_0", "loader_pin_false_workers_4", "loader_pin_true_workers_0",
          "loader_pin_true_workers_4", "dp_gpu0", "ddp_nproc1", "ddp_nproc1_reducer", "ddp_nproc2",
          "ddp_gloo_sync_batchnorm", "export_png", "image_folder_memory", "image_folder_none", "checkpoint_resume", "sigterm",
          "fast_baseline", "fast_auto", "fast_device_cache", "fast_channels_last", "fast_cudnn_benchmark", "fast_fused",
          "fast_matmul_highest", "fast_matmul_high", "finetune_base", "finetune_frozen", "finetune_frozen_ddp",
          "bench_harness_flags", "bench_harness", "speed_floors", "nan_stop"]
for name in cuda_only + on_cpu:
    if name not in steps:
        problems.append(f"step {name} missing")
for name, s in steps.items():
    if s["status"] == "failed":
        problems.append(f"step {name} failed: {s.get('reason')}\n  " + "\n  ".join(s.get("log_tail", [])[-15:]))
    if name in cuda_only and (s["status"] != "skipped" or not s.get("reason")):
        problems.append(f"CUDA-only step {name} is {s['status']}, not skipped with a reason")
    # bench_harness may be skipped (it is, unless PROVE_DRY_HARNESS=1): with a reason
    if name in on_cpu and s["status"] == "skipped" and (name != "bench_harness" or not s.get("reason")):
        problems.append(f"step {name} was skipped on the CPU: {s.get('reason')}")
for name in ("cifar_seed", "amp_bf16", "ddp_nproc2"):
    if name in steps and steps[name]["status"] == "passed" and "samples_per_s" not in steps[name]["figures"]:
        problems.append(f"step {name}: no samples/s figure was read")
# The speed floors measured every case a user can turn on (fp16 alone needs CUDA).
speed = {c["name"]: c for c in steps.get("speed_floors", {}).get("figures", {}).get("speed", [])}
for case in ("fp32_graph", "bf16", "accumulation_2", "grad_clip", "class_weights", "adam", "foreach", "ddp_nproc1",
             "tta_net_fp32", "tta_net_bf16"):
    if "samples_per_s" not in speed.get(case, {}):
        problems.append(f"speed case {case}: no steady samples/s ({speed.get(case, {}).get('error', 'missing')})")
if problems:
    print(open(md[0]).read())
    sys.exit("FAIL:\n" + "\n".join(problems))
print(f"ok: {len(steps)} steps, {report['counts']}, {report['elapsed_s']:.0f} s")
PY
