#!/usr/bin/env bash
# scripts/gpu/prove.sh --dry-run, checked: the GPU proof must not rot between GPU runs.
#
#   gpu_proof_dry_run.sh kit    the whole kit (--call kit): every step present, none failed, the CUDA-only ones
#                               skipped with a reason
#   gpu_proof_dry_run.sh plan   the two device calls of plan.tsv (issue 57): each step writes its figures with its
#                               floors, the results fit what the device hands back (8 files, 2 folders), each call's
#                               steps' expected seconds fit its budget and the calls fit the device's 15 minutes, a
#                               step that would overrun the budget is "not run", and summarize.py fails a step whose
#                               figure misses its floor or is missing
#
# Needs GPUTRAIN_BIN (CTest passes $<TARGET_FILE:gputrain>).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mktemp -d "${TMPDIR:-/tmp}/gputrain-prove-test.XXXXXX")"
trap 'rm -rf "$out"' EXIT
: "${GPUTRAIN_BIN:?set GPUTRAIN_BIN to the gputrain binary}"
what="${1:?kit or plan}"

prove() {  # OUTDIR ARGS...: prove.sh, which must exit 0
  local dir="$1" rc=0
  shift
  "$root/scripts/gpu/prove.sh" "$dir" --dry-run "$@" || rc=$?
  [ "$rc" -eq 0 ] || { echo "FAIL: prove.sh --dry-run $* exited with $rc"; cat "$dir"/*.md 2>/dev/null; exit 1; }
}

if [ "$what" = kit ]; then
  prove "$out"
  python3 - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
md, js = glob.glob(f"{out}/gpu-*-cpu-dry-run-callkit.md"), glob.glob(f"{out}/gpu-*-cpu-dry-run-callkit.json")
problems = []
if len(md) != 1 or len(js) != 1:
    sys.exit(f"FAIL: expected one gpu-<date>-cpu-dry-run-callkit .md and .json in {out}, found {md} {js}")
if not glob.glob(f"{out}/logs-callkit.tar.gz"):
    problems.append("no logs-callkit.tar.gz")
report = json.load(open(js[0]))
steps = {s["name"]: s for s in report["steps"]}
# Every step of the kit; the CUDA-only ones must be skipped with a reason in a dry run.
cuda_only = ["nvidia_smi", "invalid_gpu_index", "cuda_tests", "nvjpeg_decode", "make_speed_data", "amp_fp16",
             "amp_fp16_overflow", "oom", "fast_cuda_graph_false", "fast_cuda_graph_true", "image_folder_decode_gpu"]
on_cpu = ["make_data", "info", "info_json", "info_json_visible0", "invalid_gpu_device", "cifar_seed", "fmnist_cnn", "amp_off",
          "amp_bf16", "loader_pin_false_workers_0", "loader_pin_false_workers_4", "loader_pin_true_workers_0",
          "loader_pin_true_workers_4", "dp_gpu0", "ddp_nproc1", "ddp_nproc1_reducer", "ddp_nproc2",
          "ddp_gloo_sync_batchnorm", "export_png", "image_folder_memory", "image_folder_none", "export_jpeg",
          "checkpoint_resume", "sigterm", "fast_baseline", "fast_auto", "fast_device_cache", "fast_channels_last",
          "fast_cudnn_benchmark", "fast_fused", "fast_matmul_highest", "fast_matmul_high", "finetune_base",
          "finetune_frozen", "finetune_frozen_ddp", "bench_harness_flags", "bench_harness", "speed_floors", "nan_stop"]
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
  exit 0
fi

[ "$what" = plan ] || { echo "usage: gpu_proof_dry_run.sh kit|plan"; exit 2; }
start=$EPOCHREALTIME
prove "$out/call1" --call 1
prove "$out/call2" --call 2
# A budget too small for the races: they are recorded as not run, with the reason, and the call still succeeds.
PROVE_BUDGET_S=50 prove "$out/short" --call 2
python3 - "$root" "$out" "$(awk "BEGIN { printf \"%.0f\", $EPOCHREALTIME - $start }")" <<'PY'
import glob, json, os, re, subprocess, sys
root, out, seconds = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(root, "scripts", "gpu"))
import summarize  # noqa: E402  (its FLOORS are the steps' floors)

problems = []
plan = {}
for line in open(os.path.join(root, "scripts", "gpu", "plan.tsv")):
    row = line.rstrip("\n").split("\t")
    if row[0] == "call":
        plan.setdefault(row[1], {"budget": float(row[2]), "timeout": float(row[3]), "steps": {}})
    elif row[0] == "step":
        plan[row[2]]["steps"][row[1]] = float(row[3])

# The device's limits (/work/.library/device/README.md): 10 minutes a call, 15 minutes of device time for the
# session, the machine's start (up to 2 minutes) included; the issue's: call 1 at most 6 minutes, call 2 at most 4.
for call, most in (("1", 360), ("2", 240)):
    p = plan[call]
    total = sum(p["steps"].values())
    if not total <= p["budget"] < p["timeout"] <= most:
        problems.append(f"call {call}: its steps expect {total:.0f} s, budget {p['budget']:.0f} s, timeout_s "
                        f"{p['timeout']:.0f} s: they must rise in that order, to at most {most} s")
spare = 900 - 120 - plan["1"]["timeout"] - plan["2"]["timeout"] - 30  # start, the calls, the transfers
if spare < 120:
    problems.append(f"the two calls leave {spare:.0f} s of the 15 minutes for a rerun of a failed step")

def files_back(directory):
    """What the device hands back from $OUT: at most 8 files, 2 folders deep, plain names."""
    found = []
    for dirpath, _, names in os.walk(directory):
        depth = os.path.relpath(dirpath, directory).count(os.sep) + (dirpath != directory)
        for name in names:
            found.append((os.path.relpath(os.path.join(dirpath, name), directory), depth))
    bad = [f for f, depth in found if depth > 2 or not re.fullmatch(r"[A-Za-z0-9._/-]+", f)]
    return found, bad

for call in ("1", "2"):
    directory = os.path.join(out, f"call{call}")
    found, bad = files_back(directory)
    if len(found) > 8 or bad:
        problems.append(f"call {call}: {len(found)} files back ({bad or 'too many'})")
    js = glob.glob(os.path.join(directory, f"gpu-*-cpu-dry-run-call{call}.json"))
    if len(js) != 1 or not glob.glob(os.path.join(directory, f"gpu-*-cpu-dry-run-call{call}.md")) \
            or not os.path.exists(os.path.join(directory, f"logs-call{call}.tar.gz")):
        problems.append(f"call {call}: no .json, .md and logs-call{call}.tar.gz in {sorted(f for f, _ in found)}")
        continue
    report = json.load(open(js[0]))
    steps = {s["name"]: s for s in report["steps"]}
    if not report["final"] or report["plan"]["budget_s"] != plan[call]["budget"]:
        problems.append(f"call {call}: the report is not final, or names another budget: {report['plan']}")
    for name, expected in plan[call]["steps"].items():
        s = steps.get(name)
        if s is None:
            problems.append(f"call {call}: step {name} missing")
            continue
        if s.get("expected_s") != expected or not s.get("expected_source"):
            problems.append(f"call {call}: step {name}: expected {s.get('expected_s')} s ({s.get('expected_source')!r}),"
                            f" plan.tsv says {expected}")
        if s["status"] == "failed":
            problems.append(f"call {call}: step {name} failed: {s.get('reason')}\n  "
                            + "\n  ".join(s.get("log_tail", [])[-15:]))
        elif s["status"] == "skipped":
            if not s.get("reason", "").startswith("needs a CUDA GPU"):
                problems.append(f"call {call}: step {name} skipped on the CPU: {s.get('reason')}")
        elif s["status"] != "passed":
            problems.append(f"call {call}: step {name} is {s['status']}: {s.get('reason')}")
        if name in summarize.FLOORS or name == "speed_floors":
            if not s.get("floors"):
                problems.append(f"call {call}: step {name} names no floor")
            if s["status"] == "passed":
                checks = {c["figure"]: c for c in s.get("checks", [])}
                for floor in s["floors"]:
                    if "only_on" in floor:
                        continue
                    c = checks.get(floor["figure"])
                    if c is None or c["value"] is None or floor["figure"] not in s.get("figures", {}):
                        problems.append(f"call {call}: step {name}: no figure {floor['figure']} beside its floor")
    print(f"call {call}: {report['counts']}, {report['elapsed_s']:.0f} s")

short = json.load(open(glob.glob(os.path.join(out, "short", "*.json"))[0]))
for name in ("race_record", "race_cifar"):
    s = next(s for s in short["steps"] if s["name"] == name)
    if s["status"] != "not run" or "budget" not in s.get("reason", ""):
        problems.append(f"with a 50 s budget, {name} is {s['status']} ({s.get('reason')}), not 'not run' for the budget")

# summarize.py's verdicts on a GPU run: a figure under its floor fails the step with the figure, a figure that is
# missing fails it, and the final report's exit code says so.
work = os.path.join(out, "verdicts")
os.makedirs(os.path.join(work, "logs"))
with open(os.path.join(work, "logs", "finetune_frozen.log"), "w") as f:
    f.write("[info] model.init_from: 1 tensor skipped, 1,280 values keep their initialisation: fc1.weight\n"
            "[info] model.freeze_batchnorm: eval\n[warning] train.cuda_graph: off because it is a test\nTest set: 1\n")
with open(os.path.join(work, "logs", "record_sweep.log"), "w") as f:
    f.write("the sweep's record is missing\n")
with open(os.path.join(work, "steps.tsv"), "w") as f:
    for name in ("finetune_frozen", "record_sweep"):
        f.write("\t".join([name, "any", "ran", "", "0", "1.0", "0", "", "cmd"]) + "\n")
done = subprocess.run([sys.executable, os.path.join(root, "scripts", "gpu", "summarize.py"), "--steps",
                       os.path.join(work, "steps.tsv"), "--logs", os.path.join(work, "logs"), "--stem",
                       os.path.join(work, "report"), "--plan", os.path.join(root, "scripts", "gpu", "plan.tsv"),
                       "--call", "1", "--budget", "330", "--dry-run", "0", "--final"], capture_output=True, text=True)
verdicts = {s["name"]: s for s in json.load(open(os.path.join(work, "report.json")))["steps"]}
if done.returncode != 1:
    problems.append(f"summarize.py --final exited {done.returncode} with failed steps: {done.stderr}")
if verdicts["finetune_frozen"]["status"] != "failed" or "cuda_graph off, floor == on" not in verdicts["finetune_frozen"]["reason"]:
    problems.append(f"a floor missed on the GPU: {verdicts['finetune_frozen']['status']}, {verdicts['finetune_frozen']['reason']}")
if verdicts["record_sweep"]["status"] != "failed" or "no figure for" not in verdicts["record_sweep"]["reason"]:
    problems.append(f"figures missing: {verdicts['record_sweep']['status']}, {verdicts['record_sweep']['reason']}")
if verdicts["speed_floors"]["status"] != "not run":
    problems.append(f"a planned step never reached is {verdicts['speed_floors']['status']}, not 'not run'")

if problems:
    for md in sorted(glob.glob(os.path.join(out, "call*", "*.md"))):
        print(open(md).read())
    sys.exit("FAIL:\n" + "\n".join(problems))
print(f"ok: both calls' dry runs, their budgets and summarize.py's verdicts, {seconds} s")
PY
