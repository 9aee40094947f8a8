#!/usr/bin/env python3
"""configs/fashion_mnist_fast.yaml written as a PyTorch script, for the time-to-93% race.

The recipe of the config, step for step: the same residual network built in the
same layer order right after torch.manual_seed(seed) (so both start from the same
weights), gputrain's sample order and augmentation draws (SplitMix64, computed
before training), 2-pixel translations with the edges mirrored in and random
flips applied per sample in DataLoader workers as torchvision's
RandomCrop(padding_mode="reflect") and RandomHorizontalFlip would, Nesterov SGD
with no weight decay on biases and norm weights, the trapezoid schedule
lr * min(1, (s+1)/(aT), (T-s)/(cT)) per step, cross-entropy with label
smoothing, an AveragedModel EMA (get_ema_multi_avg_fn, use_buffers=True) from
epoch 2, and evaluation of the average on each test image and its mirror image
(averaged logits) after every epoch, stopping at the target accuracy.

Timing as gputrain's time_to_target_s: from the start of the first epoch to the
evaluation that reaches the target, evaluations left out (time_to_target_wall_s
keeps them). Prints one JSON line on stdout.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, Dataset, Sampler

from reference import SplitMix64, derive_seed, gputrain_order, read_idx

AUGMENT_STREAM = 2  # lib/src/data/loaders/batch_plan.cpp: kAugmentStream


def placements(seed, epoch, batch_index, count, pad):
    """draw_placements of lib/src/data/loaders/batch_plan.cpp: (dy, dx, flip) for each sample of one batch."""
    rng = SplitMix64(derive_seed(derive_seed(derive_seed(seed, AUGMENT_STREAM), epoch), batch_index))
    out = []
    for _ in range(count):
        dy = rng.next() % (2 * pad + 1) - pad
        dx = rng.next() % (2 * pad + 1) - pad
        out.append((dy, dx, rng.next() & 1 == 1))
    return out


class AugmentedSampler(Sampler):
    """gputrain's order and draws of each epoch, precomputed: yields (row, dy, dx, flip)."""

    def __init__(self, n, seed, epochs, batch, pad):
        self.epochs = []
        for e in range(epochs):
            order = gputrain_order(seed, e, n)
            draws = []
            for b in range(0, n, batch):
                draws += placements(seed, e, b // batch, min(batch, n - b), pad)
            self.epochs.append([(row, *d) for row, d in zip(order, draws)])
        self.epoch = 0

    def __iter__(self):
        items = self.epochs[self.epoch]
        self.epoch += 1
        return iter(items)

    def __len__(self):
        return len(self.epochs[0])


def mirrored(i, size):
    return torch.where(i < 0, -i, torch.where(i >= size, 2 * size - 2 - i, i))


class FashionMNIST(Dataset):
    """HWC uint8 images; each __getitem__ translates (edges mirrored), flips, then ToTensor and Normalize."""

    def __init__(self, images, targets, mean, std):
        self.data, self.targets, self.mean, self.std = images, targets, mean, std
        height, width = images.shape[1:3]
        self.rows, self.cols = torch.arange(height), torch.arange(width)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, item):
        row, dy, dx, flip = item if isinstance(item, tuple) else (item, 0, 0, False)
        img = self.data[row]
        if dy or dx or flip:
            cols = self.cols.flip(0) if flip else self.cols
            img = img[mirrored(self.rows + dy, len(self.rows))][:, mirrored(cols + dx, len(self.cols))]
        x = img.permute(2, 0, 1).to(torch.float32).div(255)
        return (x - self.mean) / self.std, self.targets[row]


class Residual(nn.Module):
    def __init__(self, *layers):
        super().__init__()
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x) + x


def conv(cin, cout):
    return nn.Conv2d(cin, cout, 3, padding=1, bias=False)


def network():
    """configs/fashion_mnist_fast.yaml's model.layers, in its order (the order the weights are drawn in)."""
    layers = [conv(1, 24), nn.BatchNorm2d(24), nn.GELU()]
    cin = 24
    for width in (32, 64, 128):
        layers += [conv(cin, width), nn.MaxPool2d(2), nn.BatchNorm2d(width), nn.GELU(),
                   Residual(conv(width, width), nn.BatchNorm2d(width), nn.GELU())]
        cin = width
    layers += [nn.MaxPool2d(3), nn.Flatten(), nn.Linear(128, 10, bias=False)]
    return nn.Sequential(*layers)


def evaluate(model, loader, device):
    """Accuracy of the averaged logits of each image and its mirror image."""
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for inputs, labels in loader:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            logits = (model(inputs) + model(inputs.flip(3))) / 2
            correct += (logits.argmax(1) == labels).sum().item()
            total += labels.size(0)
    return correct / total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="the IDX files (.gz or not)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--warmup", type=float, default=0.1, help="warm-up fraction of the run's steps")
    p.add_argument("--cooldown", type=float, default=0.9, help="decay fraction of the run's steps")
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--ema", type=float, default=0.99, help="EMA decay")
    p.add_argument("--ema-start", type=int, default=2, help="first epoch (1-based) that updates the average")
    p.add_argument("--crop", type=int, default=2, help="translation in pixels, edges mirrored in")
    p.add_argument("--target", type=float, default=0.93)
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0: torch's default")
    p.add_argument("--log-every", type=int, default=50)
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    mean, std = torch.tensor(0.2860), torch.tensor(0.3530)
    train_set = FashionMNIST(*read_idx(args.data, True), mean, std)
    test_set = FashionMNIST(*read_idx(args.data, False), mean, std)
    sampler = AugmentedSampler(len(train_set), args.seed, args.epochs, args.batch, args.crop)
    pin = device.type == "cuda"
    trainloader = DataLoader(train_set, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                             pin_memory=pin, persistent_workers=args.workers > 0)
    testloader = DataLoader(test_set, batch_size=args.batch, num_workers=args.workers, pin_memory=pin)

    torch.manual_seed(args.seed)
    net = network().to(device)
    no_decay = [p for p in net.parameters() if p.dim() <= 1]
    decay = [p for p in net.parameters() if p.dim() > 1]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=args.lr, momentum=args.momentum, nesterov=True)
    total = args.epochs * len(trainloader)
    rise, fall = args.warmup * total, args.cooldown * total

    def factor(s):
        f = 1.0
        if rise > 0:
            f = min(f, (s + 1) / rise)
        if fall > 0:
            f = min(f, (total - s) / fall)
        return max(0.0, f)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(args.ema), use_buffers=True)

    result = {"impl": "python", "device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
              "workers": args.workers, "seed": args.seed, "target": args.target, "epochs": []}
    start = time.perf_counter()
    eval_s = 0.0
    step = 0
    for epoch in range(1, args.epochs + 1):
        net.train()
        for inputs, labels in trainloader:
            inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = criterion(net(inputs), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if epoch >= args.ema_start:
                ema.update_parameters(net)
            step += 1
            if step % args.log_every == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.4f}", file=sys.stderr)
        evaluated = time.perf_counter()
        accuracy = evaluate(ema if epoch >= args.ema_start else net, testloader, device)
        now = time.perf_counter()
        eval_s += now - evaluated
        record = {"epoch": epoch, "test_accuracy": accuracy, "train_s": now - start - eval_s, "wall_s": now - start}
        result["epochs"].append(record)
        print(f"epoch {epoch}: test accuracy {100 * accuracy:.2f}%, {record['train_s']:.1f} s training",
              file=sys.stderr)
        if accuracy >= args.target:
            result["target_reached"] = {"accuracy": accuracy, "epoch": epoch, "step": step,
                                        "time_to_target_s": record["train_s"],
                                        "time_to_target_wall_s": record["wall_s"]}
            break
    result["test_accuracy"] = result["epochs"][-1]["test_accuracy"]
    result.setdefault("target_reached", None)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
