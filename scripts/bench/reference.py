#!/usr/bin/env python3
"""The Python scripts gputrain replaces, written the way their seeds write them.

  cnn    PyTorch's CIFAR-10 tutorial: a map-style Dataset that converts one image
         at a time (ToTensor, then Normalize), a torch DataLoader with worker
         processes, the tutorial's Net, SGD with momentum, loss.item() every step.
  mlp    the MLP tutorial: a TensorDataset through a DataLoader, MLP 20 -> 64 -> 2, Adam.
  bound  the same model's train step alone, on one batch already in memory.

Each reads the files gputrain reads (CIFAR-10 binary, IDX, or the .npy files of
`gputrain datasets export`) and prints one JSON line on stdout.

Two choices make the runs comparable sample for sample, and cost nothing in the
timed loop: the weights are initialised after torch.manual_seed(seed) in the
layer order gputrain uses (so both start from the same weights), and the
sampler replays gputrain's per-epoch shuffle (SplitMix64 Fisher-Yates, computed
before training) instead of RandomSampler's; --order torch restores the latter.

The one departure from the tutorial: torchvision is not installed, so images
are not round-tripped through PIL before ToTensor. The transforms below do what
ToTensor and Normalize do to the tensor (HWC uint8 -> CHW float / 255, then
(x - mean) / std on a copy), so this reference's loader is, if anything, faster
than the real tutorial's.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

MASK = (1 << 64) - 1


# --- gputrain's sample order (lib/src/data/loaders/rng.h, host_loader.cpp) -----------------------------

class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def derive_seed(seed, stream):
    return SplitMix64(seed ^ SplitMix64(stream + 0x5851F42D4C957F2D).next()).next()


def gputrain_order(seed, epoch, n):
    order = list(range(n))
    rng = SplitMix64(derive_seed(derive_seed(seed, 1), epoch))
    for i in range(n, 1, -1):
        j = rng.next() % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


class ReplaySampler(Sampler):
    """gputrain's shuffle of each epoch, precomputed; one epoch per __iter__."""

    def __init__(self, n, seed, epochs):
        self.orders = [gputrain_order(seed, e, n) for e in range(epochs)]
        self.epoch = 0

    def __iter__(self):
        order = self.orders[self.epoch]
        self.epoch += 1
        return iter(order)

    def __len__(self):
        return len(self.orders[0])


# --- data sets -----------------------------------------------------------------------------------

def read_cifar(root, train):
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if train else ["test_batch.bin"]
    raw = bytearray()
    for name in names:
        with open(os.path.join(root, name), "rb") as f:
            raw += f.read()
    records = torch.frombuffer(raw, dtype=torch.uint8).view(-1, 3073)
    # HWC, as torchvision's CIFAR10 keeps it (self.data.transpose((0, 2, 3, 1))).
    images = records[:, 1:].reshape(-1, 3, 32, 32).permute(0, 2, 3, 1).contiguous()
    return images, records[:, 0].long().tolist()


def read_idx_file(path):
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            opener = gzip.open if candidate.endswith(".gz") else open
            with opener(candidate, "rb") as f:
                data = f.read()
            break
    else:
        sys.exit(f"reference.py: {path}[.gz] not found")
    magic, = struct.unpack(">I", data[:4])
    rank = magic & 0xFF
    sizes = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).view(*sizes)


def read_idx(root, train):
    prefix = "train" if train else "t10k"
    images = read_idx_file(os.path.join(root, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx_file(os.path.join(root, f"{prefix}-labels-idx1-ubyte"))
    return images.unsqueeze(3).contiguous(), labels.long().tolist()  # [N, 28, 28, 1]: HWC


class ToTensor:
    """torchvision.transforms.ToTensor on an HWC uint8 image: CHW float in [0, 1]."""

    def __call__(self, img):
        return img.permute(2, 0, 1).contiguous().to(dtype=torch.float32).div(255)


class Normalize:
    """torchvision.transforms.Normalize(mean, std), not in place."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, tensor):
        tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype, device=tensor.device)
        std = torch.as_tensor(self.std, dtype=tensor.dtype, device=tensor.device)
        return tensor.sub_(mean.view(-1, 1, 1)).div_(std.view(-1, 1, 1))


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ImageDataset(Dataset):
    """torchvision's CIFAR10 / FashionMNIST: HWC uint8 storage, one image transformed per __getitem__."""

    def __init__(self, images, targets, transform):
        self.data, self.targets, self.transform = images, targets, transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.data[index], self.targets[index]
        return self.transform(img), target


def image_sets(args):
    reader = read_cifar if args.format == "cifar" else read_idx
    train_images, train_targets = reader(args.data, True)
    test_images, test_targets = reader(args.data, False)
    channels = train_images.shape[3]
    transform = Compose([ToTensor(), Normalize((args.mean,) * channels, (args.std,) * channels)])
    return ImageDataset(train_images, train_targets, transform), ImageDataset(test_images, test_targets, transform)


def load_npy_set(directory, split):
    import numpy as np
    inputs = torch.from_numpy(np.load(os.path.join(directory, f"{split}_inputs.npy")))
    targets = torch.from_numpy(np.load(os.path.join(directory, f"{split}_targets.npy")))
    return TensorDataset(inputs, targets)


# --- models --------------------------------------------------------------------------------------

class Net(nn.Module):
    """The tutorial's Net; input channels and fc1's width follow the images (as gputrain's cifar10_cnn)."""

    def __init__(self, channels=3, side=32):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        s = ((side - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * s * s, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def mlp(features, hidden, classes):
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


# --- the recipes ---------------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(net, loader, device):
    correct = total = 0
    with torch.no_grad():
        for inputs, labels in loader:
            inputs, labels = inputs.to(device), labels.to(device)
            correct += (net(inputs).argmax(1) == labels).sum().item()
            total += labels.size(0)
    return correct / total


def train(args, net, optimizer, train_set, test_set, workers, pin):
    """The tutorial's loop, timed per epoch; the test pass after each epoch is not in the training time."""
    device = torch.device(args.device)
    sampler = ReplaySampler(len(train_set), args.seed, args.epochs) if args.order == "gputrain" else None
    trainloader = DataLoader(train_set, batch_size=args.batch, shuffle=sampler is None, sampler=sampler,
                             num_workers=workers, pin_memory=pin)
    testloader = DataLoader(test_set, batch_size=args.batch, shuffle=False, num_workers=workers, pin_memory=pin)
    criterion = nn.CrossEntropyLoss()
    epochs = []
    accuracy = None
    for epoch in range(args.epochs):
        net.train()
        running_loss = 0.0
        samples = 0
        start = time.perf_counter()
        for inputs, labels in trainloader:
            inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            samples += labels.size(0)
        sync(device)
        seconds = time.perf_counter() - start
        net.eval()
        accuracy = evaluate(net, testloader, device)
        epochs.append({"samples": samples, "train_s": seconds, "samples_per_s": samples / seconds,
                       "loss": running_loss / len(trainloader), "test_accuracy": accuracy})
        print(f"epoch {epoch + 1}: {samples / seconds:.0f} samples/s, loss {running_loss / len(trainloader):.4f}, "
              f"test accuracy {100 * accuracy:.2f}%", file=sys.stderr)
    return epochs, accuracy


def compute_bound(net, optimizer, inputs, targets, steps, device):
    """The train step alone, on one batch already on the device: the limit a loader can approach."""
    criterion = nn.CrossEntropyLoss()
    net.train()

    def step():
        optimizer.zero_grad()
        loss = criterion(net(inputs), targets)
        loss.backward()
        optimizer.step()

    for _ in range(max(3, steps // 10)):  # warm-up
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    seconds = time.perf_counter() - start
    return {"steps": steps, "batch": inputs.size(0), "step_ms": 1e3 * seconds / steps,
            "samples_per_s": steps * inputs.size(0) / seconds}


def build(args):
    """Data, model and optimizer of the recipe; the model is built right after manual_seed, as gputrain does."""
    device = torch.device(args.device)
    if args.recipe == "cnn":
        train_set, test_set = image_sets(args)
        _, side, _, channels = train_set.data.shape
        torch.manual_seed(args.seed)
        net = Net(channels, side).to(device)
        optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)
    else:
        train_set, test_set = load_npy_set(args.data, "train"), load_npy_set(args.data, "test")
        features = train_set.tensors[0].shape[1]
        classes = int(train_set.tensors[1].max()) + 1
        torch.manual_seed(args.seed)
        net = mlp(features, args.hidden, classes).to(device)
        optimizer = optim.Adam(net.parameters(), lr=args.lr)
    return device, net, optimizer, train_set, test_set


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["train", "bound"])
    p.add_argument("recipe", choices=["cnn", "mlp"])
    p.add_argument("--data", required=True, help="CIFAR-10 binary or IDX directory (cnn), export directory (mlp)")
    p.add_argument("--format", choices=["cifar", "idx"], default="cifar")
    p.add_argument("--device", default="cpu")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, help="default: 128 (cnn), 32 (mlp)")
    p.add_argument("--workers", type=int, help="DataLoader workers; default: 4 (cnn), 0 (mlp)")
    p.add_argument("--lr", type=float, help="default: 0.01 (cnn, SGD), 1e-3 (mlp, Adam)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--mean", type=float, default=0.5)
    p.add_argument("--std", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--order", choices=["gputrain", "torch"], default="gputrain")
    p.add_argument("--steps", type=int, default=200, help="bound: timed steps")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0: torch's default")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cnn = args.recipe == "cnn"
    args.batch = args.batch or (128 if cnn else 32)
    args.lr = args.lr or (0.01 if cnn else 1e-3)
    workers = args.workers if args.workers is not None else (4 if cnn else 0)

    device, net, optimizer, train_set, test_set = build(args)
    result = {"impl": "python", "recipe": args.recipe, "mode": args.mode, "device": str(device),
              "torch": torch.__version__, "threads": torch.get_num_threads(), "batch": args.batch}
    if args.mode == "bound":
        batch = [train_set[i] for i in range(args.batch)]
        inputs = torch.stack([b[0] for b in batch]).to(device)
        targets = torch.as_tensor([int(b[1]) for b in batch]).to(device)
        result.update(compute_bound(net, optimizer, inputs, targets, args.steps, device))
    else:
        pin = device.type == "cuda"
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        epochs, accuracy = train(args, net, optimizer, train_set, test_set, workers, pin)
        later = epochs[1:] or epochs  # steady state: every epoch but the first
        result.update({"workers": workers, "epochs": epochs, "test_accuracy": accuracy,
                       "steady_samples_per_s": sum(e["samples"] for e in later) / sum(e["train_s"] for e in later)})
        if device.type == "cuda":
            result["peak_device_memory"] = torch.cuda.max_memory_allocated(device)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
