#!/usr/bin/env python3
"""Time to 93% on the real Fashion-MNIST: configs/fashion_mnist_fast.yaml in gputrain
against the same recipe in PyTorch (reference_fast.py), side by side, seed by seed.

For each seed both run once, one after the other (which goes first alternates
with the seed), each as its own process on an otherwise idle machine. The
figures are each run's own: time_to_target_s (training time from the first
epoch to the evaluation that reached the target, evaluations left out) and
time_to_target_wall_s (evaluations in). gputrain's come from the run's
run.json, the reference's from its JSON line. Writes DATE-MACHINE-time-to-93.md
and .json into --out and prints the table.

  scripts/bench/time_to_target.py --seeds 0,1,2,3,4 --device cpu
  scripts/bench/time_to_target.py --seeds 0..4 --device cuda --tag h100
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def seeds_of(text):
    if ".." in text:
        first, last = text.split("..")
        return list(range(int(first), int(last) + 1))
    return [int(s) for s in text.split(",")]


def run(cmd, log):
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, cwd=ROOT)
    return proc.returncode, proc.stdout, time.perf_counter() - start


def gputrain_run(args, seed, workdir):
    out = os.path.join(workdir, f"gputrain-{seed}")
    cmd = [args.gputrain, "train", "--config", args.config, "--output", out, "--set", f"seed={seed}",
           "--set", f"data.root={args.data}", "--set", f"device={args.device}", "--set", f"train.epochs={args.epochs}",
           "--set", f"train.target_accuracy={args.target}"]
    rc, _, seconds = run(cmd, os.path.join(workdir, f"gputrain-{seed}.log"))
    if rc != 0:
        sys.exit(f"time_to_target.py: gputrain exited {rc}: {' '.join(cmd)} (log: {workdir})")
    (run_dir,) = [os.path.join(out, d) for d in os.listdir(out)]
    with open(os.path.join(run_dir, "run.json")) as f:
        info = json.load(f)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        tests = [r for r in map(json.loads, f) if r.get("kind") == "test"]
    return {"impl": "gputrain", "seed": seed, "process_s": seconds, "target_reached": info.get("target_reached"),
            "test_accuracy": tests[-1]["accuracy"] if tests else None,
            "epochs": [{"epoch": r["epoch"], "test_accuracy": r["accuracy"]} for r in tests], "command": cmd}


def python_run(args, seed, workdir):
    cmd = [args.python, os.path.join(HERE, "reference_fast.py"), "--data", args.data, "--device", args.device,
           "--seed", str(seed), "--workers", str(args.workers), "--epochs", str(args.epochs), "--target", str(args.target)]
    rc, stdout, seconds = run(cmd, os.path.join(workdir, f"python-{seed}.log"))
    if rc != 0:
        sys.exit(f"time_to_target.py: reference_fast.py exited {rc}: {' '.join(cmd)} (log: {workdir})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update({"process_s": seconds, "command": cmd})
    return result


def figure(run_result, key):
    target = run_result.get("target_reached")
    return target[key] if target else None


def cell(value, spec):
    return "–" if value is None else format(value, spec)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0..4")
    p.add_argument("--device", default="cpu")
    p.add_argument("--config", default="configs/fashion_mnist_fast.yaml")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--gputrain", default=os.path.join(ROOT, "build/release/app/gputrain"))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--workers", type=int, default=2, help="the reference's DataLoader workers")
    p.add_argument("--epochs", type=int, default=8, help="the recipe's epochs (the config's train.epochs)")
    p.add_argument("--target", type=float, default=0.93, help="the test accuracy to reach")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="", help="appended to the machine name in the file names")
    args = p.parse_args()

    runs = []
    with tempfile.TemporaryDirectory(prefix="time-to-target-") as workdir:
        for i, seed in enumerate(seeds_of(args.seeds)):
            order = [gputrain_run, python_run] if i % 2 == 0 else [python_run, gputrain_run]
            for impl in order:
                result = impl(args, seed, workdir)
                runs.append(result)
                print(f"seed {seed} {result['impl']}: target {'reached' if result['target_reached'] else 'missed'}"
                      f" in {cell(figure(result, 'time_to_target_s'), '.1f')} s", file=sys.stderr)

    summary = {}
    for impl in ("gputrain", "python"):
        mine = [r for r in runs if r["impl"] == impl]
        times = [figure(r, "time_to_target_s") for r in mine if r["target_reached"]]
        walls = [figure(r, "time_to_target_wall_s") for r in mine if r["target_reached"]]
        summary[impl] = {"runs": len(mine), "reached": len(times),
                         "median_time_to_target_s": statistics.median(times) if times else None,
                         "median_time_to_target_wall_s": statistics.median(walls) if walls else None}
    g, py = summary["gputrain"]["median_time_to_target_s"], summary["python"]["median_time_to_target_s"]
    speedup = py / g if g and py else None

    machine = f"{platform.node()}-{args.device}{('-' + args.tag) if args.tag else ''}"
    date = datetime.date.today().isoformat()
    lines = [f"# Time to {100 * args.target:g}% on Fashion-MNIST: gputrain against PyTorch, {date}", "",
             f"- machine: {machine}, {os.cpu_count()} hardware threads, load average before "
             f"{os.getloadavg()[0]:.2f}",
             f"- command: `scripts/bench/time_to_target.py {' '.join(sys.argv[1:])}`",
             f"- gputrain: `{args.config}`; PyTorch: `scripts/bench/reference_fast.py` (same network, initial "
             "weights, sample order, augmentation draws, schedule, EMA and test views)",
             "- time to target: training time from the first epoch to the evaluation that reached the target, evaluations "
             "left out; wall: with them", "",
             "| seed | impl | reached | epoch | accuracy % | time to target s | wall s | process s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        t = r["target_reached"] or {}
        lines.append(f"| {r['seed']} | {r['impl']} | {'yes' if t else 'no'} | {t.get('epoch', '–')} | "
                     f"{cell(100 * t['accuracy'] if t else None, '.2f')} | {cell(t.get('time_to_target_s'), '.1f')} "
                     f"| {cell(t.get('time_to_target_wall_s'), '.1f')} | {r['process_s']:.1f} |")
    lines += ["", "| impl | reached | median time to target s | median wall s |", "|---|---|---|---|"]
    for impl, s in summary.items():
        lines.append(f"| {impl} | {s['reached']} of {s['runs']} | {cell(s['median_time_to_target_s'], '.1f')} | "
                     f"{cell(s['median_time_to_target_wall_s'], '.1f')} |")
    lines += ["", f"gputrain is **{cell(speedup, '.2f')}×** faster to the target (median training time)."]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{date}-{machine}-time-to-{100 * args.target:g}")
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump({"machine": machine, "args": vars(args), "runs": runs, "summary": summary, "speedup": speedup},
                  f, indent=1)


if __name__ == "__main__":
    main()
