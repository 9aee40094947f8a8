#!/usr/bin/env python3
"""gputrain's image loader alone against torchvision's, on the same JPEG folder and cores (issue 41).

Both sides decode the training split's JPEGs and apply the standard ImageNet
training transforms: a random resized crop to SIZE (scale 0.08-1, ratio 3/4-4/3),
a horizontal flip, the conversion to float and the normalisation, into batches of
BATCH. Neither caches decoded images. Each side is pinned to the same CORES
(taskset) with one loader worker per core:

- torchvision: ImageFolder + DataLoader(num_workers=CORES, persistent workers),
  the transforms of its ImageNet reference (RandomResizedCrop with antialias,
  RandomHorizontalFlip, ToTensor, Normalize), PIL's decoder (libjpeg-turbo);
- gputrain: `gputrain bench --loader-only` on a config with data.dataset:
  image_folder, data.cache: none, data.num_workers: CORES and the same transforms,
  which times the training loader exactly as `train` would build it.

Both draw the crop's box from the image at its own size and resize the box once.
How they get there differs: gputrain decodes only the box (libjpeg-turbo skips
the rows above it and crops the columns, and decodes at 1/2, 1/4 or 1/8 when the
box is still at least SIZE there) and resizes with torch's fixed-point uint8 kernel
(torchvision.transforms.v2's for uint8 tensors) on data.decode_threads threads
(auto: one per core); torchvision decodes the whole image with PIL and resizes
with PIL.

Each repetition runs both, alternating which goes first; the table gives the median
images/s of WARMUP-then-STEPS batches. Writes <date>-<host>-cpu-loader-race.{md,json}
under scripts/bench/results/ (or --out).

  loader_race.py --root DIR [--make 2000] [--cores 2] [--batch 128] [--steps 30] [--warmup 3] [--reps 3]
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

from race_common import MEAN, STD, commit, ensure_image_folder, last_json, torchvision_folder

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def torchvision_side(args):
    """Runs in the pinned child: batches/s of torchvision's loader, one JSON line."""
    import torch

    train = torchvision_folder(args.root, args.size)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch, shuffle=True, num_workers=args.cores,
                                         persistent_workers=True, drop_last=True)

    def endless():
        while True:
            yield from loader

    batches = endless()
    for _ in range(args.warmup):
        next(batches)
    start = time.perf_counter()
    samples = 0
    for _ in range(args.steps):
        samples += next(batches)[0].shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"samples_per_s": samples / seconds, "images": len(train)}))


def gputrain_config(args, path):
    classes = len([d for d in (args.root / "train").iterdir() if d.is_dir()])
    path.write_text(f"""name: loader-race
device: cpu
data:
  dataset: image_folder
  root: {args.root}
  cache: none
  image_size: {args.size}
  batch_size: {args.batch}
  drop_last: true
  num_workers: {args.cores}
  device_cache: false
  normalize: {{mean: {MEAN}, std: {STD}}}
  augment:
    random_resized_crop: {{size: {args.size}}}
    hflip: true
model:
  name: layers
  layers: [adaptive_avgpool, flatten, {{type: linear, out_features: {classes}}}]
""")


def pinned(args):
    return ["taskset", "-c", f"0-{args.cores - 1}"]


def run_side(side, args, config):
    if side == "torchvision":
        command = pinned(args) + [sys.executable, __file__, "--side", "torchvision", "--root", str(args.root),
                                  "--cores", str(args.cores), "--batch", str(args.batch), "--size", str(args.size),
                                  "--steps", str(args.steps), "--warmup", str(args.warmup)]
    else:
        command = pinned(args) + [str(args.gputrain), "bench", "--config", str(config), "--loader-only", "--json",
                                  "--steps", str(args.steps), "--warmup", str(args.warmup)]
    return last_json(command, side)["samples_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=pathlib.Path, required=True, help="image folder (made with --make if absent)")
    parser.add_argument("--make", type=int, default=2000, help="training images to generate when ROOT is absent")
    parser.add_argument("--cores", type=int, default=min(2, os.cpu_count()))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=30, help="timed batches")
    parser.add_argument("--warmup", type=int, default=3, help="untimed batches first")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--gputrain", type=pathlib.Path, default=ROOT / "build/release/app/gputrain")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results")
    parser.add_argument("--side", choices=["torchvision"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.root = args.root.resolve()
    if args.side:
        return torchvision_side(args)
    ensure_image_folder(args.root, args.make, HERE)
    runs = {"gputrain": [], "torchvision": []}
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "loader-race.yaml"
        gputrain_config(args, config)
        config_text = config.read_text()
        for rep in range(args.reps):
            order = ["gputrain", "torchvision"] if rep % 2 == 0 else ["torchvision", "gputrain"]
            for side in order:
                runs[side].append(run_side(side, args, config))
                print(f"rep {rep + 1}: {side} {runs[side][-1]:.0f} images/s", file=sys.stderr)
            lines = write(args, runs, config_text)  # after every repetition: a run cut short keeps those done
    print("\n".join(lines))


def write(args, runs, config_text):
    """The .md and .json of the repetitions so far; returns the .md's lines."""
    median = {side: statistics.median(values) for side, values in runs.items()}
    ratio = median["gputrain"] / median["torchvision"]
    images = sum(1 for _ in (args.root / "train").rglob("*.jpg"))
    date = datetime.date.today().isoformat()
    name = f"{date}-{platform.node()}-cpu-loader-race"
    import torch
    import torchvision
    lines = [
        f"# Loader race on the CPU, {date}: gputrain against torchvision, {args.cores} cores",
        "",
        f"- machine: {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
        f"load average at the end {os.getloadavg()[0]:.2f}",
        f"- gputrain {commit(ROOT)}; torch {torch.__version__}, torchvision {torchvision.__version__}",
        f"- data: {images} JPEGs of 256-500 px a side in {args.root} (scripts/bench/make_image_folder.py)",
        f"- both: random resized crop to {args.size} (scale 0.08-1, ratio 3/4-4/3), flip, float, normalise; "
        f"batch {args.batch}; {args.cores} workers pinned to cores 0-{args.cores - 1}; "
        f"{args.warmup} warm-up then {args.steps} timed batches; {len(runs['torchvision'])} of {args.reps} "
        "repetitions, order alternating",
        "- both draw the box on the image at its own size and resize it once; gputrain decodes only the box "
        "(at 1/2-1/8 scale when the box allows) and resizes with torch's uint8 kernel (torchvision v2's) on its "
        "decode threads (data.decode_threads auto: one per core); torchvision decodes whole images and resizes "
        "with PIL",
        f"- command: scripts/bench/loader_race.py --root {args.root} --cores {args.cores} --batch {args.batch} "
        f"--steps {args.steps} --warmup {args.warmup} --reps {args.reps}",
        "",
        "| loader | images/s (median) | each repetition |",
        "|---|---:|---|",
    ]
    for side in ("gputrain", "torchvision"):
        lines.append(f"| {side} | {median[side]:.0f} | {', '.join(f'{v:.0f}' for v in runs[side])} |")
    lines += ["", f"gputrain / torchvision: **{ratio:.2f}x** (target: at least 2x at the same core count)", "",
              "gputrain's config:", "", "```yaml", config_text.rstrip(), "```"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"{name}.json").write_text(json.dumps({"runs": runs, "median": median, "ratio": ratio,
                                                       "args": {k: str(v) for k, v in vars(args).items()}},
                                                      indent=1) + "\n")
    return lines

if __name__ == "__main__":
    main()
