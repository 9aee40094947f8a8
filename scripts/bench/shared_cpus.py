#!/usr/bin/env python3
"""Runs sharing the CPUs: does each keep a fair share of its solo speed?

Times the Fashion-MNIST MLP's train step (`gputrain bench`, configs/fashion_mnist.yaml by default)
alone, then --together copies at once, and prints each run's samples/s, its ratio to the solo
speed, and the train.threads decision each run logged. The target (issue 37): two runs at once on
2 cores each keep at least 40% of the solo speed; LibTorch's default threads kept 2-5%, because
every parallel region ends waiting for a thread another process has pushed off its core.

    scripts/bench/shared_cpus.py                                  # train.threads: auto
    scripts/bench/shared_cpus.py --set train.threads=0            # LibTorch's default, to compare
    OMP_WAIT_POLICY=PASSIVE scripts/bench/shared_cpus.py          # libgomp's waiters sleep
    scripts/bench/shared_cpus.py --steps 20 --warmup 2            # a smoke test, seconds

Run it on a quiet machine: other jobs change both the solo speed and the decision. Needs a release
build (scripts/build.sh release gputrain). Prints a Markdown table; --json FILE also writes every run.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = 0.40


def start(args):
    """One `gputrain bench` process, started (not waited for)."""
    cmd = [args.binary, "bench", "-c", args.config, "--steps", str(args.steps), "--warmup", str(args.warmup), "--json"]
    for override in args.set:
        cmd += ["--set", override]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    """{samples_per_s, threads, decision} of a started run; exits on failure."""
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.exit(f"gputrain bench failed (exit {proc.returncode}):\n{err}")
    report = json.loads(out.strip().splitlines()[-1])
    decision = re.search(r"train\.threads: .*", err)
    return {"samples_per_s": report["samples_per_s"], "threads": report["threads"],
            "decision": decision.group(0) if decision else ""}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join(ROOT, "build/release/app/gputrain"))
    parser.add_argument("--config", default="configs/fashion_mnist.yaml")
    parser.add_argument("--steps", type=int, default=1500, help="timed steps per run (default 1500: ~5 s solo)")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--together", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--set", action="append", default=[], help="an override for every run, e.g. train.threads=0")
    parser.add_argument("--json", help="also write every run here")
    args = parser.parse_args()

    solo = finish(start(args))
    together = [finish(p) for p in [start(args) for _ in range(args.together)]]

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"# {args.together} runs at once vs one alone: {args.config}, {args.steps} steps")
    print()
    print(f"- machine: {os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} in this affinity mask; load after: {load}")
    print(f"- overrides: {' '.join(args.set) or 'none'}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}")
    print()
    print("| run | threads | samples/s | of solo | decision |")
    print("|---|---|---|---|---|")
    print(f"| solo | {solo['threads']} | {solo['samples_per_s']:.0f} | 100% | {solo['decision']} |")
    for i, r in enumerate(together, 1):
        share = r["samples_per_s"] / solo["samples_per_s"] if solo["samples_per_s"] > 0 else 0
        r["of_solo"] = share
        print(f"| together #{i} | {r['threads']} | {r['samples_per_s']:.0f} | {100 * share:.0f}% | {r['decision']} |")
    worst = min(r["of_solo"] for r in together)
    print()
    print(f"worst run at once: {100 * worst:.0f}% of solo (target: at least {100 * TARGET:.0f}%): "
          f"{'met' if worst >= TARGET else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "load_after": load, "solo": solo, "together": together}, f, indent=1)


if __name__ == "__main__":
    main()
