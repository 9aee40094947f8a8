#!/usr/bin/env python3
"""A folder of JPEGs that cost what photos cost to decode (issue 41's benchmark data).

ROOT/train/<class>/*.jpg and ROOT/test/<class>/*.jpg, each image 256-500 pixels a
side (width and height drawn apart), in the layout `data.dataset: image_folder`
and torchvision's ImageFolder read. Flat colour would compress to almost nothing
and decode faster than any photo; these have a photo's statistics instead:

- an amplitude spectrum falling as 1/f (natural images' power law), so detail
  at every scale, with random phases;
- colour channels correlated as in photos (a luminance field plus weaker chroma);
- a few hard-edged shapes of the class's hue, so the JPEG has edges to code and
  the classes differ;
- saved at quality 90, the size a camera or a web photo has per pixel.

Deterministic given --seed, whatever --jobs (each image draws from its own
generator, seeded by the seed, its split and its index). Needs numpy and Pillow
(torchvision's dependency).

  make_image_folder.py ROOT [--train 2000] [--test 200] [--classes 10] [--seed 0] [--jobs 1]
"""
import argparse
import multiprocessing
import pathlib

import numpy as np
from PIL import Image


def pink_noise(rng, height, width):
    """A field whose amplitude spectrum falls as 1/f, scaled to [-1, 1]."""
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = 1.0
    spectrum = (rng.standard_normal(f.shape) + 1j * rng.standard_normal(f.shape)) / f
    spectrum[0, 0] = 0.0
    field = np.fft.irfft2(spectrum, s=(height, width))
    return field / (np.abs(field).max() + 1e-12)


def image(rng, label, classes):
    height, width = (int(v) for v in rng.integers(256, 501, size=2))
    luminance = pink_noise(rng, height, width)
    chroma = [0.35 * pink_noise(rng, height, width) for _ in range(2)]
    rgb = np.stack(
        [luminance + chroma[0], luminance - 0.5 * chroma[0] + 0.5 * chroma[1], luminance - chroma[1]], axis=-1)
    rgb = 128.0 + 60.0 * rgb
    hue = 2.0 * np.pi * label / classes  # the class's colour, for its shapes
    colour = 128.0 + 100.0 * np.array([np.cos(hue), np.cos(hue - 2.1), np.cos(hue + 2.1)])
    yy, xx = np.mgrid[0:height, 0:width]
    for _ in range(int(rng.integers(2, 6))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(20, height / 3), rng.uniform(20, width / 3)
        inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 < 1.0
        rgb[inside] = 0.6 * colour + 0.4 * rgb[inside]
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")


def write_image(job):
    """One image: (root, split, index, classes, seed)."""
    root, split, i, classes, seed = job
    label = i % classes
    folder = root / split / f"class{label:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 0 if split == "train" else 1, i])
    image(rng, label, classes).save(folder / f"{i:06d}.jpg", quality=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=pathlib.Path)
    parser.add_argument("--train", type=int, default=2000, help="training images (default 2000)")
    parser.add_argument("--test", type=int, default=200, help="test images (default 200)")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="processes writing images (about 40 ms each on one core)")
    args = parser.parse_args()
    jobs = [(args.root, split, i, args.classes, args.seed)
            for split, count in (("train", args.train), ("test", args.test)) for i in range(count)]
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            pool.map(write_image, jobs, chunksize=8)
    else:
        for job in jobs:
            write_image(job)
    print(f"wrote {args.train} training and {args.test} test JPEGs in {args.classes} classes to {args.root}")


if __name__ == "__main__":
    main()
