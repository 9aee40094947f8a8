"""What issue 41's races share: their generated image folder, torchvision's side of it (the ImageNet training
transforms on an ImageFolder), and running a side whose last stdout line is one JSON object."""
import json
import subprocess
import sys

MEAN = [0.485, 0.456, 0.406]  # ImageNet's, as torchvision's reference uses
STD = [0.229, 0.224, 0.225]


def ensure_image_folder(root, train, here):
    """Makes `train` generated JPEGs under ROOT (make_image_folder.py beside this file, in `here`) unless ROOT has a
    train/ folder; a few test images too, as a run's plan reads the test split."""
    if not (root / "train").is_dir():
        subprocess.run([sys.executable, str(here / "make_image_folder.py"), str(root), "--train", str(train), "--test",
                        "20"], check=True)


def run_json(command, what):
    """Runs `command`; returns its last stdout line as JSON and its stderr, or exits naming `what` with the end of its
    stderr."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def last_json(command, what):
    """Runs `command`; returns its last stdout line as JSON, or exits naming `what` with the end of its stderr."""
    return run_json(command, what)[0]


def commit(root):
    """The checkout's commit, for a report; a machine without git (a bare GPU machine) says so."""
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown (no git here)"


def torchvision_folder(root, size):
    """ROOT/train as torchvision's ImageFolder with its ImageNet training transforms: a random resized crop to SIZE
    (antialiased), a flip, the conversion to float and the normalisation (seeded: torch.manual_seed(0))."""
    import torch
    from torchvision import datasets, transforms

    torch.manual_seed(0)
    transform = transforms.Compose([
        transforms.RandomResizedCrop(size, antialias=True),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(MEAN, STD),
    ])
    return datasets.ImageFolder(str(root / "train"), transform=transform)
