"""torchvision's side of tests/models/torchvision_test.cpp: its networks with
random weights (no download), and gputrain's exports loaded into them.

  torchvision_check.py make DIR NET CLASSES
      torchvision.models.NET(num_classes=CLASSES) with every parameter and
      batchnorm statistic drawn (seeded) -> DIR/tv.pth (torch.save of its
      state_dict); CLASSES images of 256x256 in DIR/folder/train/c<i>/ (an
      image_folder root, its test split the same folder) and their probabilities under
      torchvision's evaluation transforms (resize 256, centre crop 224,
      ImageNet normalisation) and the network's forward -> DIR/tv_probabilities.npy,
      rows in the images' sorted path order.
  torchvision_check.py check DIR NET CLASSES
      Loads each state dict gputrain wrote (DIR/exported.pth from `export
      --format state_dict`, DIR/pytorch/model.pt beside `--format pytorch`'s
      module) into torchvision.models.NET(num_classes=CLASSES) with
      strict=True, runs DIR/input.npy through it and prints, as one JSON
      object per file, the largest absolute difference from gputrain's own
      outputs (DIR/expected.npy) and their largest magnitude ("scale").

Exits 3 when torch or torchvision is missing.
"""
import json
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
    from PIL import Image
    from torchvision import transforms
except ImportError as error:
    print(f"a reader is not installed: {error}", file=sys.stderr)
    sys.exit(3)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def network(name, classes):
    return getattr(torchvision.models, name)(num_classes=classes).eval()


def draw(model):
    """Every tensor away from its initialisation, so a swapped name or a dropped tensor shows."""
    torch.manual_seed(7)
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_var"):
                tensor.copy_(torch.rand_like(tensor) + 0.5)
            elif name.endswith("running_mean"):
                tensor.copy_((torch.rand_like(tensor) - 0.5) * 0.2)
            elif tensor.dim() <= 1 or name.endswith(("class_token", "pos_embedding")):
                tensor.add_((torch.rand_like(tensor) - 0.5) * 0.2)
            elif tensor.abs().max() == 0:  # vit's head starts at zeros: give it values to carry
                tensor.copy_(torch.randn_like(tensor) * 0.02)
            else:
                tensor.mul_(1.0 + (torch.rand_like(tensor) - 0.5) * 0.2)


def make(folder, name, classes):
    model = network(name, classes)
    draw(model)
    torch.save(model.state_dict(), os.path.join(folder, "tv.pth"))
    rng = np.random.default_rng(3)
    paths = []
    for c in range(classes):
        os.makedirs(os.path.join(folder, "folder", "train", f"c{c}"), exist_ok=True)
        # Smooth pictures (a coarse grid upsampled) rather than noise: what a network sees.
        coarse = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
        picture = Image.fromarray(coarse).resize((256, 256), Image.BILINEAR)
        path = os.path.join(folder, "folder", "train", f"c{c}", "image.png")
        picture.save(path)
        paths.append(path)
    evaluate = transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    )
    batch = torch.stack([evaluate(Image.open(p).convert("RGB")) for p in sorted(paths)])
    with torch.no_grad():
        probabilities = torch.softmax(model(batch), dim=1).numpy()
    print(json.dumps(probabilities.tolist()))


def check(folder, name, classes):
    inputs = torch.from_numpy(np.load(os.path.join(folder, "input.npy")))
    expected = np.load(os.path.join(folder, "expected.npy"))
    found = {}
    for label, path in [("state_dict", "exported.pth"), ("pytorch", os.path.join("pytorch", "model.pt"))]:
        model = network(name, classes)
        model.load_state_dict(torch.load(os.path.join(folder, path)), strict=True)
        with torch.no_grad():
            outputs = model(inputs).numpy()
        found[label] = {
            "max_abs": float(np.abs(outputs - expected).max()),
            "scale": float(np.abs(expected).max()),
        }
    print(json.dumps(found))


def main():
    torch.set_num_threads(1)
    command, folder, name, classes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    {"make": make, "check": check}[command](folder, name, classes)


if __name__ == "__main__":
    main()
