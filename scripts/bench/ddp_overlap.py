#!/usr/bin/env python3
"""ddp on 2 Gloo ranks (`train --nproc 2`, this CPU): the gradient path of one
gputrain binary against another's, and how much of the all-reduce backward hides.

  scripts/bench/ddp_overlap.py --old /tmp/old/app/gputrain [--new build/release/app/gputrain]

--old is a build of gputrain before c10d's Reducer (gradients all-reduced in
25 MB buckets after the last backward); --new the current one, whose Reducer
all-reduces each bucket during backward as soon as its gradients are ready.
Each repetition runs the variants back to back, alternating their order.

Workloads:
  mlp_wide    synthetic 1024 features, MLP 2048-2048-2048, 10 classes: 10.5 M
              parameters (42 MB of gradients), global batch 256
  fmnist_res  configs/fashion_mnist_resnet.yaml's network on generated 28x28
              images (295 k parameters), global batch 256

Figures: ms per optimizer step over epochs 2..N (metrics.jsonl's epoch records:
epoch_s / steps, evaluation excluded), median over repetitions; for the new
binary the Reducer's own timing at the end of the run (PyTorch DDP's runtime
stats: backward, its all-reduce, and the part of it that overlapped backward).
Writes scripts/bench/results/<date>-<host>-cpu-ddp-overlap.{md,json}.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MLP_WIDE = """
name: mlp_wide
seed: 0
device: cpu
data: {dataset: synthetic, samples: 8192, test_samples: 256, features: 1024, classes: 10,
       batch_size: 256, num_workers: 0}
model: {name: mlp, hidden: [2048, 2048, 2048]}
optim: {name: sgd, lr: 0.01, momentum: 0.9}
train: {epochs: EPOCHS, log_every: 1000, tensorboard: false}
checkpoint: {every: 0}
"""


def fmnist_res(data_dir, epochs):
    with open(os.path.join(ROOT, "configs/fashion_mnist_resnet.yaml")) as f:
        text = f.read()
    return text, ["--set", f"data.root={data_dir}", "--set", f"train.epochs={epochs}", "--set",
                  "data.num_workers=0", "--set", "train.tensorboard=false", "--set", "checkpoint.every=0",
                  "--set", "train.log_every=1000", "--set", "device=cpu"]


def run(binary, config, extra, out_dir):
    command = [binary, "train", "--config", config, "--output", out_dir, "--nproc", "2"] + extra
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    epochs = []
    with open(os.path.join(summary["run_dir"], "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("kind") == "epoch":
                epochs.append(record)
    steady = epochs[1:] if len(epochs) > 1 else epochs
    steps = (steady[-1]["step"] - (epochs[0]["step"] if len(epochs) > 1 else 0))
    ms_per_step = 1000 * sum(e["epoch_s"] for e in steady) / steps
    timing = re.search(r"Reducer timing .*: backward ([0-9.]+) ms, its all-reduce ([0-9.]+) ms, of which "
                       r"([0-9.]+) ms \(([0-9]+)%\) overlapped", result.stderr)
    reducer = None
    if timing:
        reducer = {"backward_ms": float(timing.group(1)), "allreduce_ms": float(timing.group(2)),
                   "overlap_ms": float(timing.group(3)), "overlap_pct": float(timing.group(4))}
    return {"ms_per_step": ms_per_step, "test_loss": summary.get("test_loss"), "reducer": reducer}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="gputrain built before the Reducer")
    parser.add_argument("--new", default=os.path.join(ROOT, "build/release/app/gputrain"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workloads", default="mlp_wide,fmnist_res")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()

    variants = [("old: all-reduce after backward", args.old, []),
                ("new: Reducer (default)", args.new, []),
                ("new: Reducer, gradient_as_bucket_view", args.new, ["--set", "ddp.gradient_as_bucket_view=true"])]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        images = os.path.join(tmp, "fmnist")
        subprocess.run([args.new, "datasets", "make-idx", "--out", images, "--train", "4096", "--test", "256"],
                       check=True, capture_output=True)
        for workload in args.workloads.split(","):
            if workload == "mlp_wide":
                config = os.path.join(tmp, "mlp_wide.yaml")
                with open(config, "w") as f:
                    f.write(MLP_WIDE.replace("EPOCHS", str(args.epochs)))
                extra = []
            elif workload == "fmnist_res":
                text, extra = fmnist_res(images, args.epochs)
                config = os.path.join(tmp, "fmnist_res.yaml")
                with open(config, "w") as f:
                    f.write(text)
            else:
                raise SystemExit(f"unknown workload {workload}")
            runs = {name: [] for name, _, _ in variants}
            for rep in range(args.reps):
                order = variants if rep % 2 == 0 else list(reversed(variants))
                for name, binary, more in order:
                    out = os.path.join(tmp, f"{workload}-{rep}-{len(runs[name])}-{abs(hash(name))}")
                    runs[name].append(run(binary, config, extra + more, out))
                    print(workload, rep, name, runs[name][-1], flush=True)
            results[workload] = runs

    host = platform.node() or "host"
    date = datetime.date.today().isoformat()
    stem = os.path.join(HERE, "results", f"{date}-{host}-cpu-ddp-overlap{args.tag}")
    lines = [f"# ddp on 2 Gloo ranks, this CPU ({os.cpu_count()} cores): old gradient path vs c10d's Reducer",
             "", f"{date}, `scripts/bench/ddp_overlap.py --reps {args.reps} --epochs {args.epochs}`; "
             "ms per optimizer step over epochs 2..N (median of the repetitions, each rep's runs back to back in "
             "alternating order); the Reducer's timing is PyTorch DDP's own runtime stats on sampled steps "
             "(median of the repetitions).", "",
             "| workload | variant | ms/step (median) | each rep | backward ms | all-reduce ms | overlapped ms "
             "| share of the all-reduce hidden behind backward |",
             "|---|---|---|---|---|---|---|---|"]
    for workload, runs in results.items():
        base = statistics.median(r["ms_per_step"] for r in runs[variants[0][0]])
        for name, _, _ in variants:
            steps = [r["ms_per_step"] for r in runs[name]]
            median = statistics.median(steps)
            reducer = [r["reducer"] for r in runs[name] if r["reducer"]]
            if reducer:
                cells = [f"{statistics.median(r[k] for r in reducer):.2f}"
                         for k in ("backward_ms", "allreduce_ms", "overlap_ms")]
                cells.append(f"{statistics.median(r['overlap_pct'] for r in reducer):.0f}%")
            else:
                cells = ["–", "–", "–", "0% (it starts after backward)"]
            speed = "" if name == variants[0][0] else f" ({base / median:.2f}x)"
            lines.append(f"| {workload} | {name} | {median:.1f}{speed} | "
                         f"{', '.join(f'{s:.1f}' for s in steps)} | " + " | ".join(cells) + " |")
    with open(stem + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(stem + ".json", "w") as f:
        json.dump({"date": date, "host": host, "args": vars(args), "results": results}, f, indent=1)
    print("\n".join(lines))
    print(f"wrote {stem}.md and .json")


if __name__ == "__main__":
    main()
