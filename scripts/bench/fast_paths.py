#!/usr/bin/env python3
"""Each fast path on and off, on run.py's workloads: are the defaults the fastest correct choice?

For each workload it trains gputrain with the defaults (every switch `auto`), with every fast
path off, with each one turned off alone from the defaults, and with each one turned on alone
from all-off; under train.amp bf16 it adds channels_last on and off (its auto rule needs amp).
Each row: steady samples/s (epochs 2..N), the final test accuracy, the built-in monitor's mean
GPU utilization and the loader wait of those epochs, and the decisions the run logged. Then
`gputrain bench` on each workload's defaults: where a step's time goes, phase by phase.

Results: <out>/<date>-<host>-<device>-fast-paths<tag>.{md,json}.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import run as harness

OFF = {"data.device_cache": "false", "optim.fused": "false", "train.cuda_graph": "false",
       "train.cudnn_benchmark": "false", "train.channels_last": "false"}


def variants():
    """(name, overrides) pairs: the defaults, all off, each off alone, each on alone."""
    rows = [("defaults (auto)", {}), ("all off", dict(OFF))]
    for key in OFF:
        rows.append((f"defaults, {key} off", {key: "false"}))
    for key in OFF:
        on = dict(OFF, **{key: "true"})
        if key == "train.cuda_graph":
            on["optim.fused"] = "true"  # the graph replays the fused update
        rows.append((f"all off, {key} on", on))
    rows.append(("defaults, train.matmul_precision highest", {"train.matmul_precision": "highest"}))
    rows.append(("train.amp bf16 (auto)", {"train.amp": "bf16"}))
    rows.append(("train.amp bf16, train.channels_last off", {"train.amp": "bf16", "train.channels_last": "false"}))
    return rows


def decisions(log):
    keys = "|".join(re.escape(k) for k in list(OFF) + ["train.threads", "train.matmul_precision"])
    found = []
    for line in log.splitlines():
        m = re.search(rf"\] ({keys}): (\S+(?: for \d+ samples)?) \(", line)
        if m and f"{m.group(1)}: {m.group(2)}" not in found:
            found.append(f"{m.group(1)}: {m.group(2)}")
    return found


def train(args, workload, overrides, rundir):
    run_args = argparse.Namespace(gputrain=args.gputrain, gputrain_set=[f"{k}={v}" for k, v in overrides.items()])
    result = harness.gputrain_run(run_args, workload, rundir, keep_log=True)
    result["decisions"] = decisions(result.pop("log"))
    return result


def bench(args, workload):
    cmd = [args.gputrain, "bench", "--config", workload["config"], "--steps", str(workload["bound_steps"])]
    for s in workload["set"]:
        cmd += ["--set", s]
    return subprocess.run(cmd, cwd=harness.ROOT, capture_output=True, text=True, check=True).stdout


def fmt(value, spec):
    return harness.fmt(value, spec)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="cifar_cnn")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--epochs", type=int, default=3, help="epochs of the CNN workloads (seed_mlp runs its 10)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    p.add_argument("--gputrain", default=os.path.join(harness.ROOT, "build/release/app/gputrain"))
    p.add_argument("--python", default=sys.executable, help="for the machine's description only")
    p.add_argument("--data-dir", default=os.path.join(harness.ROOT, "build/bench-data"))
    p.add_argument("--out", default=os.path.join(harness.HERE, "results"))
    p.add_argument("--tag", default="")
    args = p.parse_args()

    workloads = harness.prepare(args)
    meta = harness.machine(args)
    results = {"machine": meta, "args": vars(args), "workloads": {}}
    lines = [f"# gputrain fast paths on and off — {meta['date']}", "",
             f"- machine: {meta['host']}, {meta['cpu']}, {meta['cores']} cores; device: {meta['device']}"
             + (f" ({', '.join(meta['gpu'])})" if meta.get("gpu") else ""),
             f"- {meta['gputrain']}; commit {meta['commit']}; {args.reps} repetition(s), medians; CNN workloads "
             f"{args.epochs} epochs, steady = epochs 2..N",
             ""]
    for name in args.workloads.split(","):
        w = workloads[name]
        rows = []
        for label, overrides in variants():
            runs = []
            for _ in range(args.reps):
                with tempfile.TemporaryDirectory(prefix="gputrain-fast-") as rundir:
                    runs.append(train(args, w, overrides, rundir))
            row = {"variant": label, "overrides": overrides, "runs": runs,
                   "steady": statistics.median(r["steady_samples_per_s"] for r in runs),
                   "accuracy": statistics.median(r["test_accuracy"] for r in runs),
                   "gpu_util": harness.median([r.get("gpu_util_mean") for r in runs]),
                   "loader_wait": harness.median([r.get("loader_wait_s") for r in runs]),
                   "device_mib": harness.median([r.get("peak_device_mib") for r in runs]),
                   "decisions": runs[-1]["decisions"]}
            rows.append(row)
            print(f"{name} {label}: {row['steady']:.0f} samples/s, accuracy {100 * row['accuracy']:.2f}%",
                  file=sys.stderr)
        phases = bench(args, w)
        results["workloads"][name] = {"variants": rows, "bench": phases}
        base = rows[0]["steady"]
        lines += [f"## {name}", "",
                  "| variant | steady samples/s | vs defaults | test acc | GPU util % | loader wait s | peak device MiB "
                  "| decisions |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            lines.append(f"| {r['variant']} | {r['steady']:.0f} | {r['steady'] / base:.2f}× | {100 * r['accuracy']:.2f}% "
                         f"| {fmt(r['gpu_util'], '.0f')} | {fmt(r['loader_wait'], '.2f')} "
                         f"| {fmt(r['device_mib'], '.0f')} | {'; '.join(r['decisions'])} |")
        lines += ["", f"`gputrain bench` on the defaults ({w['bound_steps']} steps):", "", "```", phases.rstrip(), "```",
                  ""]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    base_name = os.path.join(args.out, f"{stamp}-{meta['host']}-{args.device}-fast-paths{args.tag}")
    os.makedirs(args.out, exist_ok=True)
    with open(base_name + ".md", "w") as f:
        f.write("\n".join(lines))
    with open(base_name + ".json", "w") as f:
        json.dump(results, f, indent=1)
    print("\n".join(lines))
    print(f"fast_paths.py: wrote {base_name}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
