#!/usr/bin/env python3
"""gputrain against the Python scripts it replaces, back to back on one machine.

For each workload, each repetition runs the Python reference (reference.py) and
gputrain on the same data files with the same hyperparameters, alternating which
goes first, then the compute bound of each (the train step alone, on one batch
already in memory: `gputrain bench` and `reference.py bound`). It prints a
markdown table and writes it, with every raw run as JSON, to
scripts/bench/results/<date>-<host>-<device>.{md,json}.

Workloads (--workloads):
  cifar_cnn   PyTorch's CIFAR-10 tutorial recipe (configs/cifar10.yaml) on a generated
              50 000 + 10 000 image CIFAR-format set (gputrain datasets make-cifar)
  fmnist_cnn  the same recipe and Net on the real Fashion-MNIST (1 x 28 x 28)
  seed_mlp    the MLP tutorial (configs/seed_mlp.yaml) on its synthetic set, exported to
              .npy by `gputrain datasets export` for the reference

Figures: steady-state samples/s = training samples of epochs 2..N over their
training time (evaluation excluded; epoch 1 alone with --epochs 1); wall time of
the whole process (start-up, loading, every epoch and its test pass); the final
test accuracy; peak PSS of the process tree (the Python reference's DataLoader
workers included; PSS counts pages shared between them once); on CUDA the
peak device memory allocated.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FASHION = "/usr/share/datasets/fashion-mnist"


# --- processes and their memory ----------------------------------------------------------------

def tree_pids(root):
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    stack.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return pids


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_measured(cmd, env=None, cwd=ROOT, attempts=3):
    """Runs `cmd`; returns (stdout, stderr, wall seconds, peak PSS of its process tree in MiB).

    On a shared machine another user's `pkill` may end a run by a signal: such a run is
    repeated (up to `attempts` times in all) rather than reported."""
    for attempt in range(attempts):
        result = run_once(cmd, env, cwd)
        if result is not None:
            return result
        print(f"run.py: {cmd[0]} was ended by a signal; running it again", file=sys.stderr)
    sys.exit(f"run.py: {' '.join(cmd)} was ended by a signal {attempts} times")


def run_once(cmd, env, cwd):
    with open(os.devnull, "rb") as stdin:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        peak = [0]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.2):
                peak[0] = max(peak[0], sum(pss_kib(p) for p in tree_pids(proc.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out, err = proc.communicate()
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
    if proc.returncode < 0:
        return None
    if proc.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return out, err, wall, peak[0] / 1024


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in:\n" + text[-2000:])


def loadavg():
    return os.getloadavg()[0]


# --- the two implementations -------------------------------------------------------------------

def gputrain_run(args, workload, rundir, keep_log=False):
    cmd = [args.gputrain, "train", "--config", workload["config"], "--output", rundir]
    for s in workload["set"] + args.gputrain_set:
        cmd += ["--set", s]
    before = loadavg()
    out, err, wall, pss = run_measured(cmd)
    summary = last_json(out)
    epochs = []
    with open(os.path.join(summary["run_dir"], "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record.get("split") == "train" and "epoch_s" in record:
                epochs.append(record)
    later = epochs[1:] or epochs
    result = {"impl": "gputrain", "wall_s": wall, "peak_pss_mib": pss, "loadavg_before": before,
              "test_accuracy": summary.get("test_accuracy"),
              "steady_samples_per_s": sum(e["samples"] for e in later) / sum(e["epoch_s"] for e in later),
              "epochs": [{"samples": e["samples"], "train_s": e["epoch_s"], "samples_per_s": e["samples_per_s"]}
                         for e in epochs]}
    peaks = [e["memory_peak"] for e in epochs if "memory_peak" in e]
    if peaks:
        result["peak_device_mib"] = max(peaks) / 2**20
    # The built-in monitor's view of the steady epochs: how busy the GPU was, how long steps waited for data.
    utils = [e["gpus"][0]["util_mean"] for e in later if e.get("gpus") and "util_mean" in e["gpus"][0]]
    if utils:
        result["gpu_util_mean"] = statistics.mean(utils)
    result["loader_wait_s"] = sum(e.get("loader_wait_s", 0) for e in later)
    if keep_log:
        result["log"] = err
    return result


def python_run(args, workload, threads):
    cmd = [args.python, os.path.join(HERE, "reference.py"), "train"] + workload["reference"] + [
        "--device", args.device, "--threads", str(threads)]
    before = loadavg()
    out, err, wall, pss = run_measured(cmd)
    result = last_json(out)
    result.update({"wall_s": wall, "peak_pss_mib": pss, "loadavg_before": before})
    if "peak_device_memory" in result:
        result["peak_device_mib"] = result.pop("peak_device_memory") / 2**20
    return result


def gputrain_bound(args, workload):
    cmd = [args.gputrain, "bench", "--config", workload["config"], "--steps", str(workload["bound_steps"]), "--json"]
    for s in workload["set"] + args.gputrain_set:
        cmd += ["--set", s]
    out, _, _, _ = run_measured(cmd)
    return last_json(out)


def python_bound(args, workload, threads):
    cmd = [args.python, os.path.join(HERE, "reference.py"), "bound"] + workload["reference"] + [
        "--device", args.device, "--steps", str(workload["bound_steps"]), "--threads", str(threads)]
    out, _, _, _ = run_measured(cmd)
    return last_json(out)


# --- workloads ---------------------------------------------------------------------------------

def prepare(args):
    """The data files both sides read, made once under --data-dir."""
    os.makedirs(args.data_dir, exist_ok=True)
    cifar = os.path.join(args.data_dir, "cifar50k")
    if not os.path.exists(os.path.join(cifar, "test_batch.bin")):
        run_measured([args.gputrain, "datasets", "make-cifar", "--out", cifar, "--train", "50000", "--test", "10000"])
    mlp = os.path.join(args.data_dir, "seed_mlp")
    # Exported again each time (it takes a moment): the set follows configs/seed_mlp.yaml.
    run_measured([args.gputrain, "datasets", "export", "--config", "configs/seed_mlp.yaml", "--out", mlp, "--force"])
    device = [f"device={'cuda' if args.device == 'cuda' else 'cpu'}"]
    e = str(args.epochs)
    return {
        "cifar_cnn": {"config": "configs/cifar10.yaml", "bound_steps": 100,
                      "set": device + [f"data.root={cifar}", f"train.epochs={e}"],
                      "reference": ["cnn", "--data", cifar, "--format", "cifar", "--epochs", e]},
        "fmnist_cnn": {"config": "configs/cifar10.yaml", "bound_steps": 100,
                       "set": device + ["data.dataset=fashion_mnist", f"data.root={FASHION}",
                                        "data.normalize.mean=[0.5]", "data.normalize.std=[0.5]", f"train.epochs={e}"],
                       "reference": ["cnn", "--data", FASHION, "--format", "idx", "--epochs", e]},
        # A 1,474-parameter model: per-op overhead, not arithmetic, sets the pace; the
        # auto rules give it one intra-op thread and the fused Adam step (compare with
        # --python-threads 0,1, which gives the reference one thread too).
        # Its steady window (epochs 2-10) is about 20 ms of gputrain training, so one run's
        # figure swings by 10-20% with the machine; 5 times the repetitions steady the median.
        "seed_mlp": {"config": "configs/seed_mlp.yaml", "bound_steps": 2000, "rep_factor": 5,
                     "set": device,
                     "reference": ["mlp", "--data", mlp, "--epochs", "10"]},
    }


# --- the report --------------------------------------------------------------------------------

def machine(args):
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = json.loads(subprocess.run([args.gputrain, "info", "--json"], capture_output=True, text=True).stdout)
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip() != ""
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "device": args.device,
            "gpu": [g.get("name") for g in info.get("gpus", [])],
            "gputrain": subprocess.run([args.gputrain, "--version"], capture_output=True, text=True).stdout.strip(),
            "python_torch": torch_version, "python": platform.python_version(),
            "commit": commit.strip() + ("-dirty" if dirty else ""),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def python_label(threads):
    return "python" if threads == 0 else f"python ({threads} thread{'s' if threads > 1 else ''})"


def summarise(runs, impls):
    rows = {}
    for impl in impls:
        mine = [r for r in runs if r["label"] == impl]
        bound = median([r["bound_samples_per_s"] for r in mine])
        steady = median([r["steady_samples_per_s"] for r in mine])
        rows[impl] = {"steady": steady, "steady_min": min(r["steady_samples_per_s"] for r in mine),
                      "steady_max": max(r["steady_samples_per_s"] for r in mine),
                      "wall": median([r["wall_s"] for r in mine]),
                      "accuracy": median([r["test_accuracy"] for r in mine]),
                      "pss": median([r["peak_pss_mib"] for r in mine]),
                      "device_mib": median([r.get("peak_device_mib") for r in mine]),
                      "gpu_util": median([r.get("gpu_util_mean") for r in mine]),
                      "loader_wait": median([r.get("loader_wait_s") for r in mine]),
                      "bound": bound, "of_bound": median([r["of_bound"] for r in mine])}
    return rows


def markdown(meta, args, summaries, impls):
    lines = [f"# gputrain vs the Python reference — {meta['date']}", "",
             f"- machine: {meta['host']}, {meta['cpu']}, {meta['cores']} cores; device: {meta['device']}"
             + (f" ({', '.join(meta['gpu'])})" if meta.get('gpu') else ""),
             f"- {meta['gputrain']}; Python {meta['python']}, torch {meta['python_torch']}; commit {meta['commit']}",
             f"- {args.reps} repetitions per CNN workload, {5 * args.reps} of seed_mlp (its steady window is ~20 ms), "
             f"rotating which runs first; medians (steady-state range in "
             f"brackets); CNN workloads {args.epochs} epoch(s), seed_mlp 10 epochs; 1-minute load average before "
             f"the runs: {meta['load']}"
             + (f"; gputrain overrides: {' '.join(args.gputrain_set)}" if args.gputrain_set else ""),
             "",
             "| workload | impl | steady samples/s | wall s | test acc | peak PSS MiB | peak device MiB "
             "| compute bound samples/s | % of bound | GPU util % | loader wait s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, rows in summaries.items():
        for impl in impls:
            r = rows[impl]
            lines.append(f"| {name} | {impl} | {r['steady']:.0f} [{r['steady_min']:.0f}–{r['steady_max']:.0f}] "
                         f"| {r['wall']:.1f} | {100 * r['accuracy']:.2f}% | {r['pss']:.0f} "
                         f"| {fmt(r['device_mib'], '.0f')} | {r['bound']:.0f} | {fmt(100 * r['of_bound'], '.0f')}% "
                         f"| {fmt(r['gpu_util'], '.0f')} | {fmt(r['loader_wait'], '.2f')} |")
        g = rows["gputrain"]
        for impl in impls[:-1]:
            p = rows[impl]
            lines.append(f"| {name} | **gputrain / {impl}** | **{g['steady'] / p['steady']:.2f}×** "
                         f"| {p['wall'] / g['wall']:.2f}× faster | {100 * (g['accuracy'] - p['accuracy']):+.2f} pt "
                         f"| {g['pss'] / p['pss']:.2f}× | | {g['bound'] / p['bound']:.2f}× | | | |")
    lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="cifar_cnn,fmnist_cnn,seed_mlp")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2, help="epochs of the CNN workloads (seed_mlp runs its 10)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--gputrain-set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra override for every gputrain run, e.g. data.device_cache=true")
    p.add_argument("--python-threads", default="0",
                   help="comma-separated torch.set_num_threads values for the reference, one Python row each; "
                        "0: torch's default (the recipe as its users run it; the ratio that counts)")
    p.add_argument("--gputrain", default=os.path.join(ROOT, "build/release/app/gputrain"))
    p.add_argument("--python", default=os.path.expanduser("~/.cache/gputrain/venv/bin/python"))
    p.add_argument("--data-dir", default=os.path.join(ROOT, "build/bench-data"))
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--tag", default="", help="suffix of the result files' names")
    args = p.parse_args()

    workloads = prepare(args)
    meta = machine(args)
    threads = [int(t) for t in args.python_threads.split(",")]
    impls = [python_label(t) for t in threads] + ["gputrain"]
    results = {"machine": meta, "args": vars(args), "workloads": {}}
    summaries = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="gputrain-bench-") as rundir:
        for name in args.workloads.split(","):
            w = workloads[name]
            runs = []
            for rep in range(args.reps * w.get("rep_factor", 1)):
                shift = rep % len(impls)
                for impl in impls[shift:] + impls[:shift]:
                    # The bound is timed right before and right after each run and the
                    # two averaged, so that the machine's drift (minutes long on a shared
                    # VM) hits a run and its bound alike.
                    if impl == "gputrain":
                        run = lambda: gputrain_run(args, w, rundir)
                        bound = lambda: gputrain_bound(args, w)["bound_samples_per_s"]
                    else:
                        t = threads[impls.index(impl)]
                        run = lambda: python_run(args, w, t)
                        bound = lambda: python_bound(args, w, t)["samples_per_s"]
                    around = [bound()]
                    r = run()
                    around.append(bound())
                    r["label"], r["rep"] = impl, rep
                    r["bounds_around"] = around
                    r["bound_samples_per_s"] = statistics.mean(around)
                    r["of_bound"] = r["steady_samples_per_s"] / r["bound_samples_per_s"]
                    runs.append(r)
                    loads.append(r["loadavg_before"])
                    print(f"{name} rep {rep + 1} {impl}: {r['steady_samples_per_s']:.0f} samples/s "
                          f"({100 * r['of_bound']:.0f}% of {r['bound_samples_per_s']:.0f}), "
                          f"{r['wall_s']:.1f} s, accuracy {100 * r['test_accuracy']:.2f}%, "
                          f"load {r['loadavg_before']:.1f}", file=sys.stderr)
                shutil.rmtree(rundir, ignore_errors=True)
            results["workloads"][name] = {"runs": runs}
            summaries[name] = summarise(runs, impls)
    meta["load"] = f"{min(loads):.1f}–{max(loads):.1f}"
    results["summary"] = summaries
    table = markdown(meta, args, summaries, impls)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    stem = f"{datetime.date.today().isoformat()}-{meta['host']}-{args.device}{'-' + args.tag if args.tag else ''}"
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out, stem + ".md"), "w") as f:
        f.write(table)
    print(f"wrote {os.path.join(args.out, stem)}.{{md,json}}", file=sys.stderr)


if __name__ == "__main__":
    main()
