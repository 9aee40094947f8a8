#!/usr/bin/env python3
"""gputrain against PyTorch at its best (reference_best.py), seed by seed, on three recipes (issue 39):

  fmnist   configs/fashion_mnist_fast.yaml, to --target on the real Fashion-MNIST (time to accuracy)
  record   configs/fashion_mnist_record.yaml (whitening, Muon), to --record-target on the same data
  cifar    configs/cifar10.yaml on a CIFAR-10 binary folder (throughput)

Each run is its own process, one after the other; which side goes first alternates with the seed.
The first reference run of each recipe compiles with a cold Inductor cache (its end-to-end time is
reported apart); later ones find the cache warm, as a user's second run would. The reference runs
torch.compile(mode=--compile), reduce-overhead on CUDA (CUDA graphs, without max-autotune's search,
which did not finish compiling in 300 s on an H200). Where a reference run fails (a compile that
runs out of --run-timeout), that recipe's later reference runs use --fallback-compile (eager by
default), budget permitting; those runs are reported apart, and no ratio "at its best" counts them.

Two clocks for both sides:
  GPU time   the sum of CUDA-event intervals around each training step, over the training epochs
             up to the one that reached the target (all epochs for cifar). gputrain's comes from
             metrics.jsonl (gpu_busy x epoch_s) and holds its first epoch's cuDNN autotuning and
             graph capture; the reference's excludes its compile and warm-up (done before its clocks
             start, as the speed records time it). The reference's epoch span (first step to last,
             gaps included) is reported too.
  end to end from process start to exit (measured here, around the process), compile counted.
Steady samples/s: every training epoch after the first, host clock. First/steady: the first
training epoch's time over the mean of the later ones.

  scripts/bench/race.py --device cuda --fmnist DIR --cifar DIR --seeds 0..4 --record-seeds 0..2 --cifar-seeds 0..1 --tag h200
  scripts/bench/race.py --device cpu --seeds 0 --cifar-seeds 0 --epochs 2 --cifar-epochs 2 --target 0
Writes DATE-MACHINE-race.md and .json into --out after every run and prints the tables; --logs keeps
each run's log. Standard library only.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

from time_to_target import cell, seeds_of

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIG = {"fmnist": "fashion_mnist_fast.yaml", "record": "fashion_mnist_record.yaml", "cifar": "cifar10.yaml"}
RECIPES = ("fmnist", "record", "cifar")
# Dense bf16 tensor-core peaks in TFLOP/s (NVIDIA's data sheets, SXM parts); the H200 has the H100's compute.
BF16_PEAK = {"H100": 989.4, "H200": 989.4}


def launch(cmd, log, timeout):
    start = time.perf_counter()
    with open(log, "w") as f:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, text=True, timeout=timeout)
            rc, stdout = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired:
            rc, stdout = "timeout", ""
    return rc, stdout, time.perf_counter() - start


def tail(path, lines=6):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def first_over_steady(epoch_seconds):
    return epoch_seconds[0] / statistics.mean(epoch_seconds[1:]) if len(epoch_seconds) > 1 else None


def steady_rate(samples, seconds):
    return sum(samples[1:]) / sum(seconds[1:]) if len(seconds) > 1 else None


def data_root(args, recipe):
    return args.cifar if recipe == "cifar" else args.fmnist


def epochs_and_target(args, recipe):
    """The recipe's train.epochs and the test accuracy it stops at (0: none)."""
    return {"fmnist": (args.epochs, args.target), "record": (args.record_epochs, args.record_target),
            "cifar": (args.cifar_epochs, 0.0)}[recipe]


def gputrain_run(args, recipe, seed, workdir, _compile_mode=None):
    out = os.path.join(workdir, f"gputrain-{recipe}-{seed}")
    cmd = [args.gputrain, "train", "--config", os.path.join(args.configs, CONFIG[recipe]), "--output", out,
           "--set", f"seed={seed}", "--set", f"device={args.device}",
           "--set", f"data.root={data_root(args, recipe)}"]
    epochs, target = epochs_and_target(args, recipe)
    cmd += ["--set", f"train.epochs={epochs}"] + (["--set", f"train.target_accuracy={target}"] if target else [])
    log = os.path.join(args.logs or workdir, f"gputrain-{recipe}-{seed}.log")
    rc, _, process_s = launch(cmd, log, args.timeout)
    result = {"impl": "gputrain", "recipe": recipe, "seed": seed, "command": cmd, "rc": rc, "e2e_s": process_s}
    if rc != 0:
        result["error"] = tail(log)
        return result
    (run_dir,) = [os.path.join(out, d) for d in os.listdir(out)]
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(run_dir, "run.json")) as f:
        info = json.load(f)
    train = [r for r in records if r.get("split") == "train" and "epoch_s" in r]
    tests = [r for r in records if r.get("kind") == "test"]
    reached = info.get("target_reached")
    last = reached["epoch"] if reached else len(train)
    counted = [r for r in train if r["epoch"] <= last]
    busy = [r.get("gpu_busy") for r in counted]  # step time over epoch time, by CUDA events
    seconds = [r["epoch_s"] for r in train]
    result.update({
        "epochs": [{"epoch": r["epoch"], "epoch_s": r["epoch_s"], "samples_per_s": r["samples_per_s"],
                    "gpu_busy": r.get("gpu_busy")} for r in train],
        "test_accuracy": tests[-1]["accuracy"] if tests else None,
        "target_reached": {"epoch": reached["epoch"], "accuracy": reached["accuracy"]} if reached else None,
        # on the CPU (no CUDA events) the host clock of the same epochs
        "step_gpu_s": sum((b if b is not None else 1.0) * r["epoch_s"] for b, r in zip(busy, counted)),
        "train_s": sum(r["epoch_s"] for r in counted),
        "steady_samples_per_s": steady_rate([r["samples_per_s"] * r["epoch_s"] for r in train], seconds),
        "first_over_steady": first_over_steady(seconds)})
    return result


def forward_flops(args, recipe):
    """Forward FLOPs per sample of the recipe's network, as `gputrain model` traces them."""
    cmd = [args.gputrain, "model", "--config", os.path.join(args.configs, CONFIG[recipe]),
           "--set", f"data.root={data_root(args, recipe)}"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = re.search(r"forward FLOPs per sample: ([\d,]+)", proc.stdout)
    return int(found.group(1).replace(",", "")) if found else None


def reference_run(args, recipe, seed, workdir, compile_mode):
    cmd = [args.python, os.path.join(HERE, "reference_best.py"), recipe, "--device", args.device, "--seed", str(seed),
           "--data", data_root(args, recipe), "--compile", compile_mode]
    epochs, target = epochs_and_target(args, recipe)
    cmd += ["--epochs", str(epochs)] + (["--target", str(target)] if recipe != "cifar" else [])
    log = os.path.join(args.logs or workdir, f"reference-{recipe}-{seed}-{compile_mode}.log")
    rc, stdout, process_s = launch(cmd, log, args.timeout)
    result = {"impl": "pytorch-best", "recipe": recipe, "seed": seed, "command": cmd, "rc": rc, "e2e_s": process_s,
              "compile": compile_mode}
    if rc != 0:
        result["error"] = tail(log)
        return result
    own = json.loads(stdout.strip().splitlines()[-1])
    reached = own["target_reached"]
    seconds = [r["train_s"] for r in own["epochs"]]
    result.update({
        "epochs": own["epochs"], "gpu": own.get("gpu"), "compile": own["compile"], "compile_s": own.get("compile_s"),
        "cuda_graphs": own.get("cuda_graphs"), "cudagraph_skips": own.get("cudagraph_skips"), "amp": own["amp"],
        "warmup_s": own["warmup_s"],
        "replay_s": own["replay_s"], "load_s": own["load_s"], "test_accuracy": own["test_accuracy"],
        "target_reached": {"epoch": reached["epoch"], "accuracy": reached["accuracy"]} if reached else None,
        "step_gpu_s": reached["step_gpu_s"] if reached else own["step_gpu_s"],
        "span_gpu_s": reached["gpu_s"] if reached else own["gpu_s"],
        "train_s": sum(seconds[:reached["epoch"]] if reached else seconds),
        "steady_samples_per_s": own["steady_samples_per_s"], "first_over_steady": first_over_steady(seconds)})
    return result


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


FLOPS = {}  # recipe -> forward FLOPs per sample


def summarise(runs, recipe, requested):
    """gputrain's runs, the reference's at the requested compile mode (PyTorch at its best) and its fallback
    runs apart, and the ratios against each."""
    out = {}
    ours = [r for r in runs if r["recipe"] == recipe and r["impl"] == "gputrain" and r["rc"] == 0]
    theirs = [r for r in runs if r["recipe"] == recipe and r["impl"] == "pytorch-best" and r["rc"] == 0]
    sides = {"gputrain": ours, "pytorch-best": [r for r in theirs if r["compile"] == requested],
             "pytorch-fallback": [r for r in theirs if r["compile"] != requested]}
    for impl, mine in sides.items():
        warm = [r for r in mine if not r.get("cold")]
        out[impl] = {"runs": len(mine), "reached": sum(1 for r in mine if r.get("target_reached")),
                     "mean_accuracy": mean([r["test_accuracy"] for r in mine]),
                     "mean_step_gpu_s": mean([r["step_gpu_s"] for r in mine]),
                     "mean_span_gpu_s": mean([r.get("span_gpu_s") for r in mine]),
                     "mean_e2e_s": mean([r["e2e_s"] for r in warm or mine]),
                     "cold_e2e_s": mean([r["e2e_s"] for r in mine if r.get("cold")]),
                     "mean_steady_samples_per_s": mean([r["steady_samples_per_s"] for r in mine]),
                     "mean_first_over_steady": mean([r["first_over_steady"] for r in mine])}
        if impl != "gputrain":  # the reference's mode, its cold compile, and whether it replayed CUDA graphs
            out[impl].update({"warm_runs": len(warm), "compile": mine[0]["compile"] if mine else None,
                              "compile_s": next((r.get("compile_s") for r in mine if r.get("cold")), None),
                              "cuda_graphs": all(r.get("cuda_graphs") for r in mine) if mine else None})
        rate, flops = out[impl]["mean_steady_samples_per_s"], FLOPS.get(recipe)
        # training = forward + backward, about 3x the forward's FLOPs
        out[impl]["steady_tflops"] = 3 * flops * rate / 1e12 if rate and flops else None
    g = out["gputrain"]

    def ratio(a, b):
        return a / b if a and b else None

    def ratios(ref):
        return {"steady_samples_per_s": ratio(g["mean_steady_samples_per_s"], ref["mean_steady_samples_per_s"]),
                "gpu_time": ratio(ref["mean_step_gpu_s"], g["mean_step_gpu_s"]),
                "e2e": ratio(ref["mean_e2e_s"], g["mean_e2e_s"]),
                "e2e_cold": ratio(ref["cold_e2e_s"], g["mean_e2e_s"])}
    out["ratios"] = ratios(out["pytorch-best"])
    if out["pytorch-fallback"]["runs"]:
        out["ratios_fallback"] = ratios(out["pytorch-fallback"])
    else:
        del out["pytorch-fallback"]
    return out


def mode_note(run):
    notes = (["cold"] if run.get("cold") else []) + ([run["compile"]] if run.get("compile") else [])
    return f" ({', '.join(notes)})" if notes else ""


def peak_share(tflops, runs):
    gpu = next((r["gpu"] for r in runs if r.get("gpu")), "")
    peak = next((v for k, v in BF16_PEAK.items() if k in gpu), None)
    return f" ({100 * tflops / peak:.2f}% of the bf16 peak)" if tflops and peak else ""


def ratio_line(q, against):
    return (f"gputrain against {against}: **{cell(q['steady_samples_per_s'], '.2f')}×** its steady samples/s, "
            f"**{cell(q['gpu_time'], '.2f')}×** faster in GPU time, **{cell(q['e2e'], '.2f')}×** faster end to end "
            f"({cell(q['e2e_cold'], '.2f')}× against the reference's first run).")


def report(args, runs, summaries, machine, date, skipped):
    lines = [f"# gputrain against PyTorch at its best, {date}", "",
             f"- machine: {machine}, {os.cpu_count()} hardware threads"
             + "".join(sorted({f", {r['gpu']}" for r in runs if r.get("gpu")})),
             f"- command: `scripts/bench/race.py {' '.join(sys.argv[1:])}`",
             "- PyTorch at its best: `scripts/bench/reference_best.py` (data resident on the device, channels_last, "
             "bf16 autocast on CUDA, fused SGD, torch.compile; same network, initial weights, sample order, "
             "augmentation draws and schedule as gputrain)",
             "- GPU s: CUDA events around each training step, summed over the epochs up to the target (all epochs "
             "without one). gputrain's include its first epoch's autotuning and graph capture; the reference's exclude "
             "its compile and warm-up; on the CPU, the host clock of the same steps (gputrain: its epochs). span: the reference's epochs from first step to last, gaps included",
             "- e2e s: process start to exit, measured around the process; the reference's first run of a recipe "
             "compiles with a cold cache (cold), the others find it warm",
             "- steady: samples/s over every training epoch after the first; first/steady: the first epoch's time over "
             "a later epoch's mean; TFLOP/s: 3 x the forward FLOPs per sample (`gputrain model`: "
             + ", ".join(f"{k} {v:,}" for k, v in FLOPS.items() if v) + ") x steady samples/s, against the dense bf16 "
             "tensor-core peak of the data sheet", ""]
    for recipe in RECIPES:
        mine = [r for r in runs if r["recipe"] == recipe]
        if not mine:
            continue
        lines += [f"## {recipe}: `configs/{CONFIG[recipe]}`", "",
                  "| seed | impl | rc | epoch reached | accuracy % | GPU s | span s | e2e s | steady samples/s | first/steady |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in mine:
            t = r.get("target_reached") or {}
            lines.append(
                f"| {r['seed']} | {r['impl']}{mode_note(r)} | {r['rc']} | {t.get('epoch', '–')} | "
                f"{cell(100 * r['test_accuracy'] if r.get('test_accuracy') is not None else None, '.2f')} | "
                f"{cell(r.get('step_gpu_s'), '.3f')} | {cell(r.get('span_gpu_s'), '.3f')} | {r['e2e_s']:.1f} | "
                f"{cell(r.get('steady_samples_per_s'), '.0f')} | {cell(r.get('first_over_steady'), '.2f')} |")
        s = summaries[recipe]
        lines += ["", "| impl | runs | reached | mean accuracy % | mean GPU s | mean span s | mean e2e s (warm) | "
                  "cold e2e s | mean steady samples/s | steady TFLOP/s | first/steady |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for impl in [impl for impl in ("gputrain", "pytorch-best", "pytorch-fallback") if impl in s]:
            m = s[impl]
            lines.append(f"| {impl} | {m['runs']} | {m['reached']} | "
                         f"{cell(100 * m['mean_accuracy'] if m['mean_accuracy'] is not None else None, '.2f')} | "
                         f"{cell(m['mean_step_gpu_s'], '.3f')} | {cell(m['mean_span_gpu_s'], '.3f')} | "
                         f"{cell(m['mean_e2e_s'], '.1f')} | {cell(m['cold_e2e_s'], '.1f')} | "
                         f"{cell(m['mean_steady_samples_per_s'], '.0f')} | {cell(m['steady_tflops'], '.2f')}"
                         f"{peak_share(m['steady_tflops'], runs)} | {cell(m['mean_first_over_steady'], '.2f')} |")
        best = s["pytorch-best"]
        if best["runs"]:
            graphs = {True: "CUDA graphs replayed", False: "CUDA graphs not used", None: ""}[best["cuda_graphs"]]
            lines += ["", ratio_line(s["ratios"], f"PyTorch at its best (torch.compile mode {best['compile']}"
                                     f"{', ' + graphs if graphs else ''}; cold compile "
                                     f"{cell(best['compile_s'], '.1f')} s)"), ""]
        else:
            lines += ["", f"No reference run at torch.compile mode {args.compile} finished: no ratio against PyTorch "
                      "at its best.", ""]
        if "ratios_fallback" in s:
            lines += [ratio_line(s["ratios_fallback"], f"the reference's fallback, mode {s['pytorch-fallback']['compile']} "
                                 "(not PyTorch at its best)"), ""]
        for r in mine:
            if r["rc"] != 0:
                lines += [f"- {r['impl']} seed {r['seed']} ended with {r['rc']}:", "", "```", r.get("error", ""), "```", ""]
    if skipped:
        lines += ["Not run (the --budget-s was spent): " + ", ".join(skipped), ""]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seeds", default="0..4", help="fmnist seeds; '' skips the recipe")
    p.add_argument("--cifar-seeds", default="0..1", help="cifar seeds; '' skips the recipe")
    p.add_argument("--record-seeds", default="", help="record seeds (configs/fashion_mnist_record.yaml, Muon); '' skips it")
    p.add_argument("--fmnist", default="/usr/share/datasets/fashion-mnist", help="the IDX files")
    p.add_argument("--cifar", default="datasets/cifar-10-batches-bin", help="a CIFAR-10 binary folder")
    p.add_argument("--epochs", type=int, default=8, help="fmnist: the recipe's train.epochs")
    p.add_argument("--target", type=float, default=0.93, help="fmnist: the test accuracy to reach; 0: none")
    p.add_argument("--cifar-epochs", type=int, default=10)
    p.add_argument("--record-epochs", type=int, default=8, help="record: the recipe's train.epochs")
    p.add_argument("--record-target", type=float, default=0.94, help="record: the test accuracy to reach; 0: none")
    p.add_argument("--compile", help="reference_best.py --compile: PyTorch at its best (default: reduce-overhead "
                   "on CUDA, default on the CPU)")
    p.add_argument("--fallback-compile", default="none",
                   help="the --compile of the runs after a reference run fails; '' stops the retry")
    p.add_argument("--gputrain", default=os.path.join(ROOT, "build/release/app/gputrain"))
    p.add_argument("--configs", default=os.path.join(ROOT, "configs"))
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--run-timeout", type=float, default=600, help="seconds for one run")
    p.add_argument("--budget-s", type=float, default=0, help="start no run after this many seconds; 0: no limit")
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    p.add_argument("--logs", help="keep each run's log here (default: a temporary directory, removed)")
    p.add_argument("--tag", default="", help="appended to the machine name in the file names")
    args = p.parse_args()
    args.timeout = args.run_timeout
    args.compile = args.compile or ("reduce-overhead" if args.device.startswith("cuda") else "default")
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)

    machine = f"{platform.node()}-{args.device}{('-' + args.tag) if args.tag else ''}"
    date = datetime.date.today().isoformat()
    stem = os.path.join(args.out, f"{date}-{machine}-race")
    os.makedirs(args.out, exist_ok=True)

    def write(runs, skipped):
        """The report so far: written after every run, so that a machine taken back mid-race keeps what ran."""
        summaries = {recipe: summarise(runs, recipe, args.compile) for recipe in RECIPES}
        text = report(args, runs, summaries, machine, date, skipped)
        for suffix, content in ((".md", text), (".json", json.dumps(
                {"machine": machine, "args": vars(args), "requested_compile": args.compile, "runs": runs,
                 "summaries": summaries, "skipped": skipped}, indent=1))):
            with open(stem + suffix + ".part", "w") as f:
                f.write(content)
            os.replace(stem + suffix + ".part", stem + suffix)
        return text

    seeds_by_recipe = {"fmnist": args.seeds, "record": args.record_seeds, "cifar": args.cifar_seeds}
    for recipe, seeds in seeds_by_recipe.items():
        if seeds:
            FLOPS[recipe] = forward_flops(args, recipe)
    started = time.perf_counter()
    runs, skipped = [], []

    def budget_left(name):
        """Whether a run may start; sets its timeout to what is left of the budget, and a little more."""
        if not args.budget_s:
            return True
        if time.perf_counter() - started > args.budget_s:
            skipped.append(name)
            return False
        args.timeout = min(args.run_timeout, args.budget_s + 30 - (time.perf_counter() - started))
        return True

    with tempfile.TemporaryDirectory(prefix="race-") as workdir:
        for recipe, seeds in seeds_by_recipe.items():
            mode = args.compile  # this recipe's reference mode, until a run of it fails
            for i, seed in enumerate(seeds_of(seeds) if seeds else []):
                order = [reference_run, gputrain_run] if i % 2 == 0 else [gputrain_run, reference_run]
                for impl in order:
                    name = f"{recipe} seed {seed} {'gputrain' if impl is gputrain_run else 'pytorch-best'}"
                    if not budget_left(name):
                        continue
                    result = impl(args, recipe, seed, workdir, mode)
                    # cold: the recipe's first reference run at its mode, which compiles with Inductor's cache empty
                    result["cold"] = impl is reference_run and not any(
                        r["impl"] == "pytorch-best" and r["recipe"] == recipe and r["compile"] == mode for r in runs)
                    runs.append(result)
                    write(runs, skipped)
                    if result["rc"] != 0 and impl is reference_run and args.fallback_compile \
                            and mode != args.fallback_compile:
                        # torch.compile failed here (a compile longer than --run-timeout): this recipe's reference
                        # runs from now on use the fallback mode, reported apart from PyTorch at its best
                        mode = args.fallback_compile
                        name += f" ({mode})"
                        if budget_left(name):
                            result = impl(args, recipe, seed, workdir, mode)
                            result["cold"] = True
                            runs.append(result)
                            write(runs, skipped)
                    print(f"race: {name}: rc {result['rc']}, e2e {result['e2e_s']:.1f} s, GPU "
                          f"{cell(result.get('step_gpu_s'), '.3f')} s", file=sys.stderr)
    print(write(runs, skipped))

if __name__ == "__main__":
    main()
