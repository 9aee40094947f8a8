#!/usr/bin/env python3
"""Turns prove.sh's step records and logs into gpu-<date>-<gpu>.{md,json}.

Standard library only: it runs on the bare GPU machine too. A step passes when its exit code
is the expected one and its log matches the step's pattern; figures are read from the log
(test lines, the epoch lines' peak memory, the final JSON summary line) and from the run's
metrics.jsonl (samples/s of the last training epoch), which still exists while this runs.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re

TAIL = 40  # log lines kept in the report for a failed step
# Test accuracy a step on the real Fashion-MNIST must reach (the stand-in proves nothing about
# learning): the seed CNN gave 87.3-87.7% after 2 epochs on three GPUs, the Gloo sync-batchnorm
# ResNet 84.5-86.9% after 1.
ACCURACY_FLOORS = {"fmnist_cnn": 0.85, "ddp_gloo_sync_batchnorm": 0.80}


def decode_json_objects(text):
    """Every top-level JSON object in text (info --json spans lines; the train summary is one)."""
    decoder, found, i = json.JSONDecoder(), [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return found
        try:
            obj, end = decoder.raw_decode(text, i)
            found.append(obj)
            i = end
        except ValueError:
            i += 1


def train_epochs(run_dir):
    """The training epoch records of the run's metrics.jsonl, in order ([] when it has none)."""
    epochs = []
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("split") == "train" and "epoch_s" in r:
                    epochs.append(r)
    except OSError:
        pass
    return epochs


def last_train_epoch(run_dir):
    """The last epoch record of metrics.jsonl, and the peak device memory over all epochs."""
    epochs = train_epochs(run_dir)
    peaks = [r["memory_peak"] for r in epochs if r.get("memory_peak") is not None]
    return (epochs[-1] if epochs else None), (max(peaks) if peaks else None)


def figures_of(name, log, logs_dir):
    fig = {}
    tests = re.findall(r"Test set: .*", log)
    if tests:
        fig["test_line"] = tests[-1].strip()
    peaks = [float(p) for p in re.findall(r"peak ([0-9.]+) GiB", log)]
    if peaks:
        fig["peak_memory_gib"] = max(peaks)
    errors = [line.split("] ", 2)[-1] for line in log.splitlines() if "[error]" in line or "[critical]" in line]
    if errors:
        fig["error"] = errors[0][:600]
    skipped = len(re.findall(r"step skipped", log))
    if skipped:
        fig["fp16_steps_skipped"] = skipped
    for obj in decode_json_objects(log):
        if "run_dir" in obj:  # the train summary line (the last one wins: a resumed run's)
            fig["test_accuracy"] = obj.get("test_accuracy")
            fig["epochs"] = obj.get("epochs")
            fig["steps"] = obj.get("steps")
            fig["device"] = obj.get("device")
            epoch, peak = last_train_epoch(obj["run_dir"])
            if epoch:
                fig["samples_per_s"] = round(epoch["samples_per_s"], 1)
                if epoch.get("skipped_steps"):
                    fig["skipped_steps"] = epoch["skipped_steps"]
            if peak is not None:
                fig["peak_memory_gib"] = round(peak / 2**30, 4)
        elif "gputrain_version" in obj:  # info --json
            fig["cuda_available"] = obj.get("cuda_available")
            fig["cuda_unavailable_reason"] = obj.get("cuda_unavailable_reason") or None
            fig["driver"] = obj.get("nvidia_driver_version") or None
            fig["gpus"] = [g.get("name") for g in obj.get("gpus", [])]
            fig["cuda_visible_devices"] = obj.get("cuda_visible_devices")
    notes = [line.split("] ", 2)[-1] for line in log.splitlines()
             if re.search(r"train\.cuda_graph|CUDA graph|captur|matmul_precision|data\.device_cache|device cache|"
                          r"channels.last|cudnn|optim\.fused|train\.threads", line)
             and ("[info]" in line or "[warning]" in line)
             and not re.search(r"writes to|TensorBoard events|checkpoint /|best test|report: |weights in", line)]
    if notes:
        fig["notes"] = [n[:300] for n in notes[:6]]
    # NCCL's own words (NCCL_DEBUG=WARN lines) and c10d's "Last error:" line after its message
    lines = log.splitlines()
    nccl = [line.strip() for i, line in enumerate(lines)
            if ("NCCL" in line or "nccl" in line or "Duplicate GPU" in line) and re.search(
                r"error|Error|ERROR|WARN|refus|Duplicate|failed|invalid", line)
            or (i > 0 and lines[i - 1].strip().endswith("Last error:"))]
    if nccl:
        fig["nccl"] = [n[:600] for n in nccl[:5]]
    oom = [line.split("] ", 2)[-1] for line in log.splitlines() if "ran out of memory" in line]
    if oom:
        fig["oom_message"] = oom[0][:800]
    gtest = re.findall(r"^\[\s+(PASSED|FAILED|SKIPPED)\s+\] (\d+) tests?", log, re.M)
    if gtest:
        fig["gtest"] = {}
        for kind, n in gtest:
            fig["gtest"][kind.lower()] = fig["gtest"].get(kind.lower(), 0) + int(n)
    if name == "nvidia_smi":
        fig["gpus"] = re.findall(r"^GPU \d+: .*", log, re.M)
        rows = [line for line in log.splitlines() if re.match(r"^\d+, ", line)]
        if rows:
            fig["driver"] = rows[0].split(", ")[2]
            fig["csv"] = rows
    if name == "speed_floors":
        try:
            with open(os.path.join(logs_dir, "speed.json")) as f:
                fig["speed"] = json.load(f)["cases"]
        except (OSError, ValueError, KeyError):
            pass
    if name == "bench_harness":
        for path in sorted(glob.glob(os.path.join(logs_dir, "bench", "*.json"))):
            with open(path) as f:
                bench = json.load(f)
            fig["harness"] = {
                w: {impl: {"steady_samples_per_s": round(r["steady"], 1), "wall_s": round(r["wall"], 2),
                           "test_accuracy": r["accuracy"], "peak_device_mib": r.get("device_mib")}
                    for impl, r in rows.items()}
                for w, rows in bench.get("summary", {}).items()}
    return fig


def judge(rec, log, fig, real_fmnist):
    """(status, reason) of a step that ran."""
    rc, expect = int(rec["rc"]), int(rec["expected_rc"])
    if rc in (124, 137) and expect not in (124, 137):
        return "failed", "timed out"
    if rec["name"] == "ddp_nproc2" and rc in (1, 2) and fig.get("nccl"):
        # Two ranks on one GPU: NCCL refuses, so two-rank NCCL was not run, whatever else passed.
        return "skipped", "not run: NCCL refused two ranks on one GPU (its words in figures.nccl)"
    if rc != expect:
        return "failed", f"exit code {rc}, expected {expect}"
    if rec["name"] in ("cuda_tests", "nvjpeg_decode") and fig.get("gtest", {}).get("skipped") and rec["kind"] == "cuda":
        # a test that skips itself on the GPU machine found no usable CUDA device
        return "failed", f"{fig['gtest']['skipped']} CUDA tests skipped themselves (no usable GPU?)"
    if rec["regex"] and not re.search(rec["regex"], log, re.M):
        return "failed", f"the log does not match /{rec['regex']}/"
    floor = ACCURACY_FLOORS.get(rec["name"])
    if floor is not None and real_fmnist:
        acc = fig.get("test_accuracy")
        if acc is None or acc < floor:
            return "failed", f"test accuracy {acc} below its floor {floor} on the real Fashion-MNIST"
        return "passed", f"test accuracy {100 * acc:.2f}% >= floor {100 * floor:.0f}%"
    return "passed", ""


def cell(value, spec=""):
    return "–" if value is None else format(value, spec)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", required=True)
    p.add_argument("--logs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dry-run", default="0")
    p.add_argument("--binary", default="")
    p.add_argument("--elapsed", type=float, default=0)
    p.add_argument("--real-fmnist", default="0", help="1: the Fashion-MNIST steps ran on the real set")
    args = p.parse_args()
    dry = args.dry_run == "1"
    fields = ["name", "kind", "status", "reason", "rc", "wall_s", "expected_rc", "regex", "command"]

    steps = []
    with open(args.steps) as f:
        for line in f:
            rec = dict(zip(fields, line.rstrip("\n").split("\t")))
            rec.update({k: "" for k in fields if k not in rec})
            out = {"name": rec["name"], "kind": rec["kind"], "command": rec["command"].strip(),
                   "expected_rc": int(rec["expected_rc"] or 0), "wall_s": float(rec["wall_s"] or 0)}
            if rec["status"] == "skipped":
                out.update(status="skipped", reason=rec["reason"])
            else:
                log_path = os.path.join(args.logs, rec["name"] + ".log")
                try:
                    with open(log_path, errors="replace") as lf:
                        log = lf.read()
                except OSError:
                    log = ""
                fig = figures_of(rec["name"], log, args.logs)
                status, reason = judge(rec, log, fig, args.real_fmnist == "1")
                out.update(status=status, reason=reason, rc=int(rec["rc"]), figures=fig,
                           log=f"logs/{rec['name']}.log")
                if status == "failed":
                    out["log_tail"] = log.splitlines()[-TAIL:]
            steps.append(out)

    by_name = {s["name"]: s for s in steps}
    info = by_name.get("info_json", {}).get("figures", {})
    smi = by_name.get("nvidia_smi", {}).get("figures", {})
    gpu_names = info.get("gpus") or [re.sub(r"^GPU \d+: (.*?) \(UUID.*$", r"\1", g) for g in smi.get("gpus", [])]
    gpu = gpu_names[0] if gpu_names else ("cpu-dry-run" if dry else "no-gpu")
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"
    now = datetime.datetime.now(datetime.timezone.utc)
    version = ""
    if args.binary:
        try:
            import subprocess
            version = subprocess.run([args.binary, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    counts = {s: sum(1 for x in steps if x["status"] == s) for s in ("passed", "failed", "skipped")}
    report = {"date": now.strftime("%Y-%m-%d %H:%M UTC"), "dry_run": dry, "host": platform.node(),
              "gputrain": version, "binary": args.binary, "gpu": gpu, "gpus": gpu_names,
              "driver": smi.get("driver") or info.get("driver"), "elapsed_s": args.elapsed,
              "counts": counts, "steps": steps}
    stem = os.path.join(args.out, f"gpu-{now.strftime('%Y-%m-%d')}-{slug}")
    with open(stem + ".json", "w") as f:
        json.dump(report, f, indent=1)

    md = [f"# gputrain GPU proof{' (dry run on the CPU)' if dry else ''} — {report['date']}", "",
          f"- machine: {report['host']}; GPU: {', '.join(gpu_names) or 'none'}; driver: {report['driver'] or 'n/a'}",
          f"- {version or args.binary}",
          f"- {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped; "
          f"{args.elapsed:.0f} s in all",
          "- samples/s: the last training epoch's (metrics.jsonl); peak GiB: the caching allocator's peak",
          "", "| step | status | wall s | test accuracy | samples/s | peak GiB | notes |",
          "|---|---|---:|---:|---:|---:|---|"]
    for s in steps:
        fig = s.get("figures", {})
        notes = [s.get("reason") or ""]
        for key in ("error", "oom_message", "cuda_unavailable_reason"):
            if fig.get(key):
                notes.append(str(fig[key]))
        if fig.get("fp16_steps_skipped"):
            notes.append(f"{fig['fp16_steps_skipped']} fp16 steps skipped")
        if fig.get("nccl"):
            notes.append("NCCL: " + fig["nccl"][0])
        if fig.get("gtest"):
            notes.append("gtest " + ", ".join(f"{v} {k}" for k, v in fig["gtest"].items()))
        if s["name"].startswith("info") and fig.get("gpus") is not None:
            notes.append(f"cuda_available {fig.get('cuda_available')}, GPUs {fig.get('gpus')}")
        if s["name"].startswith("fast_") and fig.get("notes"):
            notes.extend(fig["notes"][:2])
        if s["name"] == "nvidia_smi" and fig.get("gpus"):
            notes.append("; ".join(fig["gpus"]))
        acc = fig.get("test_accuracy")
        note = "; ".join(n for n in notes if n).replace("|", "\\|").replace("\n", " ")
        md.append(f"| {s['name']} | {s['status']} | {s['wall_s']:.1f} | "
                  f"{cell(None if acc is None else 100 * acc, '.2f')}{'%' if acc is not None else ''} | "
                  f"{cell(fig.get('samples_per_s'), '.0f')} | {cell(fig.get('peak_memory_gib'), '.3f')} | {note} |")
    harness = by_name.get("bench_harness", {}).get("figures", {}).get("harness")
    if harness:
        md += ["", "## Against the Python reference (scripts/bench/run.py, 1 repetition)", "",
               "| workload | impl | steady samples/s | wall s | test accuracy | peak device MiB |",
               "|---|---|---:|---:|---:|---:|"]
        for w, rows in harness.items():
            for impl, r in rows.items():
                md.append(f"| {w} | {impl} | {cell(r['steady_samples_per_s'], '.0f')} | {cell(r['wall_s'], '.1f')} "
                          f"| {cell(None if r['test_accuracy'] is None else 100 * r['test_accuracy'], '.2f')}% "
                          f"| {cell(r['peak_device_mib'], '.0f')} |")
    speed = by_name.get("speed_floors", {}).get("figures", {}).get("speed")
    if speed:
        md += ["", "## Speed floors (scripts/gpu/speed.py): steady state after epoch 1, against the baseline "
               "measured in this call", "",
               "| case | baseline | floor | steady samples/s | ratio | spread (min-max)/median | window s | "
               "GPU busy | CUDA graph | status |", "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
        for r in speed:
            busy = r.get("gpu_busy")
            graph = (r.get("cuda_graph") or r.get("error") or "").replace("|", "\\|")
            md.append(f"| {r['name']} | {r.get('baseline') or '–'} | {cell(r.get('floor'))} | "
                      f"{cell(r.get('samples_per_s'), '.0f')} | {cell(r.get('ratio'))} | "
                      f"{cell(None if r.get('spread') is None else 100 * r['spread'], '.1f')}% | "
                      f"{cell(r.get('window_s'), '.2f')} | {cell(None if busy is None else 100 * busy, '.0f')} | "
                      f"{graph[:160]} | {r['status']} |")
    not_run = [s for s in steps if s["status"] == "skipped"]
    if not_run:
        md += ["", "## Not run here", ""] + [f"- {s['name']}: {s.get('reason', '')}" for s in not_run]
    failed = [s for s in steps if s["status"] == "failed"]
    if failed:
        md += ["", "## Failures", ""]
        for s in failed:
            md += [f"### {s['name']}: {s['reason']}", "", f"`{s['command']}`", "", "```",
                   *s.get("log_tail", []), "```", ""]
    md += ["", "## Commands", ""] + [f"- {s['name']}: `{s['command']}`" for s in steps if s["command"]]
    with open(stem + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"prove: wrote {stem}.md and .json ({counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['skipped']} skipped)")


if __name__ == "__main__":
    main()
