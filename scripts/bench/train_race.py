#!/usr/bin/env python3
"""ResNet-18/50 and ViT-B/16 trained from a JPEG folder: gputrain against PyTorch + torchvision (issues 41, 58).

Both sides train the same network shape (configs/resnet18_folder.yaml,
resnet50_folder.yaml and vit_b_16_folder.yaml are torchvision's resnet18/50 and
vit_b_16, parameter for parameter) on the same folder with the ImageNet
training transforms (random resized crop to SIZE, flip, normalise), the
config's optimizer (the ResNets: SGD with momentum 0.9 and weight decay 1e-4;
ViT-B/16: AdamW, betas 0.9/0.999, weight decay 0.3), batch BATCH, in bf16
autocast with channels-last convolutions, at the best settings each allows on
DEVICE:

- gputrain: `gputrain train` for two epochs of the folder under data.cache:
  none (every image decoded per batch), with its planned loader and fast
  paths (on a GPU the step is a CUDA graph): the second epoch's samples/s
  (`from_folder`; the first holds the warm-up), its TFLOP/s and share of the
  device's peak; and `gputrain bench`'s compute bound, the same step on one
  batch already on the device (`resident`): the network's own speed on
  resident tensors, which the folder's must come within 90% of;
- PyTorch: torchvision's resnet18/50 or vit_b_16, ImageFolder + DataLoader (WORKERS
  workers, pinned memory on CUDA, persistent), cuDNN's algorithm search on
  (torch.backends.cudnn.benchmark, as torchvision's reference sets it),
  optionally torch.compile (--compile), timed over the same steps after the
  same warm-up.

PyTorch's samples/s are steady-state: WARMUP untimed steps first (compile, cuDNN
autotuning), then STEPS timed ones, synchronised at both ends, and at least four
times the batches the DataLoader can hold ready (WORKERS x its prefetch factor
of 2): batches queued during the warm-up would otherwise make the loader look
faster than it is. gputrain's are its second epoch's (make the folder at least
10 batches); the report names the decode path its loader chose (data.decode).
Writes <date>-<host>-<device>-train-race.{md,json} under scripts/bench/results/
(or --out), after every model.

  train_race.py --root DIR [--make 512] [--device cpu|cuda] [--models resnet18,resnet50,vit_b_16] [--batch 32]
                [--steps 10] [--warmup 3] [--workers 2] [--compile default|max-autotune|none]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import shutil
import sys
import tempfile
import time

from race_common import commit, ensure_image_folder, last_json, run_json, torchvision_folder

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PREFETCH = 2  # DataLoader's prefetch_factor (its default): batches each worker keeps ready


def timed_steps(args):
    """STEPS, or four times the batches the loader can hold ready, whichever is more."""
    return max(args.steps, 4 * args.workers * PREFETCH)


def pytorch_side(args):
    """Runs in a child: steady-state samples/s of torchvision's model and loader, one JSON line."""
    import torch
    import torchvision

    device = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    train = torchvision_folder(args.root, args.size)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         persistent_workers=args.workers > 0, drop_last=True,
                                         pin_memory=device.type == "cuda",
                                         prefetch_factor=PREFETCH if args.workers > 0 else None)
    shape = {"image_size": args.size} if args.model.startswith("vit") else {}
    model = getattr(torchvision.models, args.model)(num_classes=len(train.classes), **shape)
    model = model.to(device, memory_format=torch.channels_last)
    fused = device.type == "cuda"
    if args.model.startswith("vit"):  # configs/vit_b_16_folder.yaml's optimizer
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.003, betas=(0.9, 0.999), weight_decay=0.3, fused=fused)
    else:  # configs/resnet*_folder.yaml's
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, fused=fused)
    loss_fn = torch.nn.CrossEntropyLoss()
    if args.compile != "none":
        model = torch.compile(model, mode=args.compile)

    def step(inputs, targets):
        inputs = inputs.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        targets = targets.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def endless():
        while True:
            yield from loader

    batches = endless()
    for _ in range(args.warmup):
        step(*next(batches))
    sync()
    steps = timed_steps(args)
    start = time.perf_counter()
    for _ in range(steps):
        step(*next(batches))
    sync()
    seconds = time.perf_counter() - start
    print(json.dumps({"samples_per_s": steps * args.batch / seconds, "timed_steps": steps, "compile": args.compile,
                      "cudnn_benchmark": True}))


def gputrain_side(args, model):
    """Samples/s of `gputrain train` from the folder (its second epoch) and of the compute bound (`bench`)."""
    keys = ["--set", f"data.root={args.root}", "--set", f"data.test_root={args.root / 'test'}",
            "--set", "data.cache=none", "--set", f"data.batch_size={args.batch}", "--set", "data.drop_last=true",
            "--set", f"data.num_workers={args.workers}", "--set", f"device={args.device}"]
    if args.size != 224:  # the configs' 224 (and the test's resize 256), as torchvision's side gets --size
        keys += ["--set", f"data.image_size={args.size}", "--set", f"data.augment.random_resized_crop.size={args.size}",
                 "--set", f"data.center_crop={args.size}", "--set", f"data.resize={args.size * 256 // 224}"]
    config = str(args.configs / f"{model}_folder.yaml")

    def run(command):
        return last_json(command, f"gputrain {model}")

    bench = run([str(args.gputrain), "bench", "--config", config, "--json", "--steps", str(args.steps), "--warmup",
                 str(args.warmup)] + keys)
    runs = tempfile.mkdtemp(prefix="train-race-")
    summary, log = run_json([str(args.gputrain), "train", "--config", config, "--output", runs] + keys +
                            ["--set", "train.epochs=2", "--set", "checkpoint.every=0", "--set", "train.log_every=100000"],
                            f"gputrain {model}")
    with open(os.path.join(summary["run_dir"], "metrics.jsonl")) as f:
        epochs = [r for r in map(json.loads, f) if r.get("kind") == "epoch"]
    shutil.rmtree(runs)
    decode = [line.split("data.decode: ", 1)[1].strip() for line in log.splitlines() if "data.decode: " in line]
    return {"from_folder": epochs[-1]["samples_per_s"], "first_epoch": epochs[0]["samples_per_s"],
            "resident": bench["bound_samples_per_s"], "graphed": bench.get("bound_graphed", False),
            "tflops": epochs[-1].get("tflops"), "peak_share": epochs[-1].get("peak_share"),
            "data_decode": decode[-1] if decode else None}


def pytorch_run(args, model):
    command = [sys.executable, __file__, "--side", "pytorch", "--model", model, "--root", str(args.root),
               "--device", args.device, "--batch", str(args.batch), "--size", str(args.size), "--steps",
               str(args.steps), "--warmup", str(args.warmup), "--workers", str(args.workers), "--compile",
               args.compile]
    return last_json(command, f"pytorch {model}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="image folder (made with --make if absent)")
    parser.add_argument("--make", type=int, default=256, help="training images to generate when ROOT is absent")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="resnet18,resnet50")
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=10, help="timed steps (PyTorch: at least 4 x WORKERS x 2)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count()))
    parser.add_argument("--compile", default="none", choices=["none", "default", "max-autotune"])
    parser.add_argument("--gputrain", type=pathlib.Path, default=ROOT / "build/release/app/gputrain")
    parser.add_argument("--configs", type=pathlib.Path, default=ROOT / "configs")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--side", choices=["pytorch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.root = args.root.resolve()
    if args.side:
        return pytorch_side(args)
    ensure_image_folder(args.root, args.make, HERE)
    results = {}
    for model in args.models.split(","):
        ours = gputrain_side(args, model)
        theirs = pytorch_run(args, model)
        results[model] = {"gputrain": ours, "pytorch": theirs}
        print(f"{model}: gputrain {ours['from_folder']:.1f} images/s from the folder, {ours['resident']:.1f} on "
              f"resident tensors; pytorch {theirs['samples_per_s']:.1f}", file=sys.stderr)
        lines = write(args, results)  # after every model: a run cut short keeps those done
    print("\n".join(lines))


def write(args, results):
    """The .md and .json of the models so far; returns the .md's lines."""
    import torch
    import torchvision
    date = datetime.date.today().isoformat()
    name = f"{date}-{platform.node()}-{args.device}-train-race"
    images = sum(1 for _ in (args.root / "train").rglob("*.jpg"))
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none"
    lines = [
        f"# Training race from a JPEG folder, {date}: gputrain against PyTorch + torchvision on {args.device}",
        "",
        f"- machine: {os.cpu_count()} CPU cores, GPU {gpu}; load average at the end {os.getloadavg()[0]:.2f}",
        f"- gputrain {commit(ROOT)}; torch {torch.__version__}, torchvision {torchvision.__version__}",
        f"- data: {images} JPEGs of 256-500 px in {args.root} (scripts/bench/make_image_folder.py), decoded per "
        f"batch by both (gputrain data.cache: none), random resized crop to {args.size}, flip, normalise",
        f"- both: batch {args.batch}, bf16 autocast, channels-last, the config's optimizer (ResNets: SGD momentum "
        f"0.9; ViT-B/16: AdamW); {args.workers} loader "
        f"workers; {args.warmup} warm-up steps; PyTorch: cuDNN's algorithm search on, torch.compile: "
        f"{args.compile}, {timed_steps(args)} timed steps; gputrain: its second epoch",
        f"- command: scripts/bench/train_race.py --root {args.root} --device {args.device} --models {args.models} "
        f"--batch {args.batch} --size {args.size} --steps {args.steps} --warmup {args.warmup} "
        f"--workers {args.workers} --compile {args.compile}",
        "",
        "| model | gputrain from the folder (images/s) | decode | gputrain on resident tensors | folder / resident | "
        "TFLOP/s (share of peak) | PyTorch (images/s) | gputrain / PyTorch |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for model, r in results.items():
        ours, theirs = r["gputrain"], r["pytorch"]["samples_per_s"]
        flops = (f"{ours['tflops']:.2f} ({100 * ours['peak_share']:.1f}%)"
                 if ours.get("tflops") is not None and ours.get("peak_share") is not None else "-")
        lines.append(f"| {model} | {ours['from_folder']:.1f} | {ours['data_decode'] or '-'} | {ours['resident']:.1f}"
                     f"{' (graphed)' if ours['graphed'] else ''} | {ours['from_folder'] / ours['resident']:.2f} | "
                     f"{flops} | {theirs:.1f} | {ours['from_folder'] / theirs:.2f}x |")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({"results": results, "args": {k: str(v) for k, v in
                                                                                     vars(args).items()}},
                                                      indent=1) + "\n")
    return lines

if __name__ == "__main__":
    main()
