"""Applies torchvision's functional image transforms to images for the cases
gputrain's own ops were run on, for tests/data/image_ops_cli_test.cpp.

DIR/cases.json is {"images": [[C, H, W], ...], "cases": [{"image": i, "ops":
[{"op": ..., ...}, ...]}, ...]}: image i is DIR/image_<i>.bin, uint8 [C, H, W],
and each case's ops are applied to it in turn. For case k this writes
DIR/v1_<k>.bin and DIR/v2_<k>.bin, the uint8 pixels of
torchvision.transforms.functional (v1) and torchvision.transforms.v2.functional
(v2) on the uint8 tensor. Ops:
- resized_crop: box [top, left, height, width], size [height, width]
  (BILINEAR, antialias=True);
- resize: size (the shorter side, Resize(int)) (BILINEAR, antialias=True);
- center_crop: size [height, width];
- brightness, contrast, saturation, hue: factor (F.adjust_<op>).

Usage: torchvision_ops.py DIR. Exits 3 when torch or torchvision is missing.
"""
import json
import os
import sys

try:
    import torch
    import torchvision.transforms.functional as v1
    import torchvision.transforms.v2.functional as v2
    from torchvision.transforms import InterpolationMode
except ImportError as error:
    print(f"torchvision_ops.py: {error}", file=sys.stderr)
    sys.exit(3)


def apply(functional, step, image):
    op = step["op"]
    if op == "resized_crop":
        top, left, height, width = step["box"]
        return functional.resized_crop(image, top, left, height, width, step["size"],
                                       interpolation=InterpolationMode.BILINEAR, antialias=True)
    if op == "resize":
        return functional.resize(image, step["size"], interpolation=InterpolationMode.BILINEAR, antialias=True)
    if op == "center_crop":
        return functional.center_crop(image, step["size"])
    if op in ("brightness", "contrast", "saturation", "hue"):
        return getattr(functional, "adjust_" + op)(image, step["factor"])
    raise ValueError(f"unknown op {op}")


def main(directory):
    with open(os.path.join(directory, "cases.json")) as f:
        spec = json.load(f)
    images = []
    for i, shape in enumerate(spec["images"]):
        with open(os.path.join(directory, f"image_{i}.bin"), "rb") as f:
            images.append(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).view(shape))
    for k, case in enumerate(spec["cases"]):
        for name, functional in (("v1", v1), ("v2", v2)):
            out = images[case["image"]].clone()
            for step in case["ops"]:
                out = apply(functional, step, out)
            assert out.dtype == torch.uint8, out.dtype
            with open(os.path.join(directory, f"{name}_{k}.bin"), "wb") as f:
                f.write(out.contiguous().numpy().tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
