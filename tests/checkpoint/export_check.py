"""Loads weights written by `gputrain export` with nothing but torch, rebuilds the
MLP they belong to, and prints how many images of an IDX test set it classifies
right, and how many of them are ties: images whose two largest logits are
within 2e-4 of the largest logit's magnitude (of 1 below it), twice what
another process's rounding may move each logit (tests/support/tolerance.h),
so gputrain may have classified them otherwise. With MODEL_PT, does the same
again with the weights of a run's model.pt, read by torch.jit.load.
Usage: export_check.py WEIGHTS DATA_DIR [MODEL_PT] (DATA_DIR: raw t10k-*-ubyte files)."""
import struct
import sys
from collections import OrderedDict

import torch
from torch import nn


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims :]), dtype=torch.uint8).reshape(shape)


def mlp(state):
    """fc1, act1, ..., fcN as gputrain names them (the activations hold no weights)."""
    count = sum(1 for key in state if key.endswith(".weight"))
    layers = OrderedDict(flatten=nn.Flatten())
    for i in range(1, count + 1):
        outputs, inputs = state[f"fc{i}.weight"].shape
        layers[f"fc{i}"] = nn.Linear(inputs, outputs)
        if i < count:
            layers[f"act{i}"] = nn.ReLU()
    model = nn.Sequential(layers)
    model.load_state_dict(state)
    return model.eval()


def main():
    weights, data_dir = sys.argv[1], sys.argv[2]
    images = read_idx(f"{data_dir}/t10k-images-idx3-ubyte").float() * torch.tensor(1 / 255, dtype=torch.float32)
    labels = read_idx(f"{data_dir}/t10k-labels-idx1-ubyte").long()
    states = [torch.load(weights)]  # weights_only: a plain dict of tensors
    if len(sys.argv) > 3:
        states.append(torch.jit.load(sys.argv[3]).state_dict())
    for state in states:
        with torch.no_grad():
            logits = mlp(state)(images.unsqueeze(1))
        top = logits.topk(2).values
        ties = top[:, 0] - top[:, 1] <= 2e-4 * max(1.0, logits.abs().max().item())
        print((logits.argmax(1) == labels).sum().item(), ties.sum().item())


if __name__ == "__main__":
    main()
