#!/usr/bin/env python3
"""The GPU kit's speed floors (issue 36): every configuration a user turns on, against the
graphed fp32 step measured in the same call, on the same data and network.

    speed.py --bin GPUTRAIN --configs DIR --data CIFAR_DIR --fmnist FMNIST_DIR --runs DIR --out FILE.json
             [--device cuda] [--min-steady-s 2] [--dry-run]

Each case trains in its own run directory. Its speed is the steady state: every training epoch
after the first (the first holds cuDNN's autotuning, kernel compiles and the graph capture),
summed samples over summed epoch seconds from metrics.jsonl, with the spread of those epochs'
samples/s. The epoch count is chosen from a short baseline run so that the steady window holds
at least --min-steady-s seconds of the fastest case. A case passes when its steady samples/s is at
least its floor times its baseline's. Standard library only: it runs on the bare GPU machine.
--dry-run: the CPU with tiny sizes, every case once, floors reported but not enforced (the plumbing
check CI runs through prove.sh --dry-run). Exit code 0 when every floor holds, 1 when one is missed.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from summarize import train_epochs  # beside this file, in the checkout and in the bundle

# name, config, baseline, floor, extra arguments. The CIFAR recipe on the generated set is the
# throughput workload of the earlier GPU runs; fashion_mnist_fast.yaml is the time-to-accuracy
# network, where bf16 with channels_last must beat its own fp32 graphed step.
CIFAR = "cifar10.yaml"
FAST = "fashion_mnist_fast.yaml"
CASES = [
    ("fp32_graph", CIFAR, None, None, []),
    ("bf16", CIFAR, "fp32_graph", 0.9, ["--set", "train.amp=bf16"]),
    ("fp16", CIFAR, "fp32_graph", 0.9, ["--set", "train.amp=fp16"]),
    # The baseline's micro-batch (2 x 128): what accumulation adds is the step's bookkeeping, not a smaller
    # micro-batch, which is slower per sample on any path (2 x 64 measured 0.63x on an H200, GPU 93% busy).
    ("accumulation_2", CIFAR, "fp32_graph", 0.9, ["--set", "data.batch_size=256", "--set", "train.accumulation_steps=2"]),
    ("grad_clip", CIFAR, "fp32_graph", 0.9, ["--set", "train.grad_clip=1.0"]),
    ("class_weights", CIFAR, "fp32_graph", 0.9, ["--set", "train.class_weights=[1,2,1,1,1,1,1,1,1,1]"]),
    ("adam", CIFAR, "fp32_graph", 0.9, ["--set", "optim.name=adam", "--set", "optim.lr=0.001"]),
    ("foreach", CIFAR, "fp32_graph", 0.9, ["--set", "optim.fused=false"]),
    ("ddp_nproc1", CIFAR, "fp32_graph", 0.9, ["--nproc", "1", "--set", "strategy=ddp"]),
    ("tta_net_fp32", FAST, None, None, ["--set", "train.amp=off", "--set", "train.channels_last=false"]),
    ("tta_net_bf16", FAST, "tta_net_fp32", 1.0, ["--set", "train.amp=bf16", "--set", "train.channels_last=true"]),
]
CUDA_ONLY = {"fp16"}  # fp16 autocast runs on CUDA alone


def steady(epochs):
    """Samples/s over every epoch after the first, its window in seconds, and its spread."""
    later = epochs[1:]
    if not later:
        return None
    seconds = sum(r["epoch_s"] for r in later)
    samples = sum(r["samples_per_s"] * r["epoch_s"] for r in later)
    rates = [r["samples_per_s"] for r in later]
    median = statistics.median(rates)
    return {"samples_per_s": samples / seconds, "window_s": seconds, "epochs": len(later),
            "min": min(rates), "max": max(rates), "spread": (max(rates) - min(rates)) / median if median else 0.0,
            "gpu_busy": _busy_share(later)}


def _busy_share(epochs):
    """The GPU's busy share of the window (CUDA events, metrics.jsonl's gpu_busy), or None off CUDA."""
    timed = [r for r in epochs if isinstance(r.get("gpu_busy"), (int, float))]
    if not timed:
        return None
    return sum(r["gpu_busy"] * r["epoch_s"] for r in timed) / sum(r["epoch_s"] for r in timed)


def run_case(args, name, config, extra, epochs):
    data = args.fmnist if config == FAST else args.data
    cmd = [args.bin, "train", "--config", os.path.join(args.configs, config), "--output", args.runs,
           "--set", f"name=speed_{name}", "--set", f"device={args.device}", "--set", f"data.root={data}",
           "--set", f"train.epochs={epochs}", "--set", "train.log_every=50", "--set", "checkpoint.every=0"]
    if config == FAST:
        cmd += ["--set", "train.target_accuracy=0", "--set", "train.ema.decay=0"]
    if args.dry_run:
        cmd += ["--set", "data.batch_size=32"]
    # --nproc goes right after the command name, like the other launcher options
    if extra[:1] == ["--nproc"]:
        cmd[2:2] = extra[:2]
        extra = extra[2:]
    cmd += extra
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
    wall = time.time() - t0
    log = os.path.join(args.runs, f"speed_{name}.log")
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
    result = {"name": name, "config": config, "args": extra, "rc": proc.returncode, "wall_s": round(wall, 2),
              "command": " ".join(cmd)}
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        result["error"] = " / ".join(tail)[:800]
        return result
    decisions = [line.split("] ", 2)[-1] for line in (proc.stdout + proc.stderr).splitlines()
                 if "train.cuda_graph" in line and "[" in line]
    if decisions:
        result["cuda_graph"] = decisions[0][:300]
    figures = steady([r for r in train_epochs(os.path.join(args.runs, f"speed_{name}")) if r.get("samples_per_s")])
    if figures:
        result.update({k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()})
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--configs", required=True)
    p.add_argument("--data", required=True, help="a CIFAR-10-format data set (datasets make-cifar)")
    p.add_argument("--fmnist", required=True, help="Fashion-MNIST (real or IDX stand-in)")
    p.add_argument("--runs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--min-steady-s", type=float, default=2.0)
    p.add_argument("--max-epochs", type=int, default=60)
    p.add_argument("--case-timeout", type=float, default=120)
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    os.makedirs(args.runs, exist_ok=True)

    cases = [c for c in CASES if not (args.device == "cpu" and c[0] in CUDA_ONLY)]
    # The epoch count: a 3-epoch probe of each baseline, scaled so that its steady window is long enough.
    epochs = {}
    for name, config, baseline, _, extra in cases:
        if baseline is not None:
            continue
        if args.dry_run:
            epochs[config] = 3
            continue
        probe = run_case(args, name + "_probe", config, extra, 3)
        per_epoch = probe.get("window_s", 0) / max(probe.get("epochs", 1), 1)
        # 1.5x: a case up to that much faster than its baseline still gets its window
        need = math.ceil(1.5 * args.min_steady_s / per_epoch) + 1 if per_epoch > 0 else args.max_epochs
        epochs[config] = max(3, min(args.max_epochs, need))

    results = {}

    def write():  # after every case: a step cut at its timeout keeps the cases that ran
        with open(args.out + ".part", "w") as f:
            json.dump({"device": args.device, "dry_run": args.dry_run, "min_steady_s": args.min_steady_s,
                       "cases": list(results.values())}, f, indent=1)
        os.replace(args.out + ".part", args.out)

    for name, config, baseline, floor, extra in cases:
        print(f"speed: {name} ({epochs[config]} epochs) ...", file=sys.stderr, flush=True)
        r = run_case(args, name, config, extra, epochs[config])
        r["floor"] = floor
        r["baseline"] = baseline
        if baseline and "samples_per_s" in r and "samples_per_s" in results.get(baseline, {}):
            r["ratio"] = round(r["samples_per_s"] / results[baseline]["samples_per_s"], 3)
        if r["rc"] != 0 or "samples_per_s" not in r:
            r["status"] = "failed"
        elif floor is None:
            r["status"] = "baseline"
        elif "ratio" not in r:
            r["status"] = "failed"
        elif args.dry_run:
            r["status"] = "measured (dry run: floor not enforced)"
        else:
            r["status"] = "passed" if r["ratio"] >= floor else "below floor"
        if not args.dry_run and r.get("window_s", 0) < args.min_steady_s and r["status"] != "failed":
            r["status"] += f" (steady window {r.get('window_s', 0):.2f} s < {args.min_steady_s} s)"
        results[name] = r
        write()
        print(f"speed: {name}: {r['status']} {r.get('samples_per_s', 0):.0f} samples/s ratio {r.get('ratio', '-')}",
              file=sys.stderr, flush=True)

    print("| case | baseline | floor | steady samples/s | ratio | spread | window s | GPU busy | status |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results.values():
        busy = r.get("gpu_busy")
        print(f"| {r['name']} | {r['baseline'] or '–'} | {r['floor'] or '–'} | {r.get('samples_per_s', 0):.0f} "
              f"| {r.get('ratio', '–')} | {100 * r.get('spread', 0):.1f}% | {r.get('window_s', 0):.2f} "
              f"| {'–' if busy is None else f'{100 * busy:.0f}%'} | {r['status']} |")
    bad = [r["name"] for r in results.values()
           if r["status"] == "failed" or r["status"].startswith("below floor")]
    if bad:
        print(f"speed: missed: {', '.join(bad)}")
        return 1
    print(f"speed: every case at or over its floor ({len(results)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
