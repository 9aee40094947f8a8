#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (corpus/<target>/): small valid inputs
and one of each kind of bad input the readers reject. Run it again after a
format changes; libFuzzer mutates from these.  Usage: tests/fuzz/make_seeds.py"""
import gzip
import json
import math
import pathlib
import struct
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def corpus(target):
    """corpus/<target>/, emptied of all but the found-* files: inputs fuzzing found, kept
    as they are as regression seeds (each is named in a comment where its fix is)."""
    directory = HERE / "corpus" / target
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if not path.name.startswith("found-"):
            path.unlink()
    return directory


def write(directory, name, data):
    (directory / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def config_seeds():
    d = corpus("config")
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        write(d, "shipped-" + path.stem, path.read_bytes())
    # YAML, then a NUL byte and --set overrides one per line (fuzz_config.cpp).
    write(d, "overrides", "name: x\ndata: {dataset: synthetic}\n\0data.batch_size=8\ngpus=[0,1]\nmodel.hidden=[4, 4]")
    write(d, "override-bad", "name: x\n\0data.batch_size\n=3\ndata..x=1\nname.sub=2")
    write(d, "empty", "")
    write(d, "flow", "{name: a, seed: 3, data: {dataset: random, length: 10, input_size: 3}, model: {name: linear}}")
    write(d, "unknown-key", "data:\n  batch_sise: 4\n")
    write(d, "duplicate-key", "seed: 1\nseed: 2\n")
    write(d, "wrong-types", "seed: [1]\ndata: 3\nmodel: {hidden: x}\noptim: {lr: abc, betas: [1]}\n")
    write(d, "malformed", "data:\n  batch_size: 4\n dataset: x\n")
    write(d, "anchors", "data: &d {dataset: synthetic}\nmodel: *d\n")
    write(d, "tags", "seed: !!str 4\nname: !custom x\n")
    write(d, "documents", "name: a\n---\nname: b\n")
    write(d, "special-scalars", "optim: {lr: .inf, eps: .nan, momentum: -.inf}\ndata: {normalize: {mean: [.nan], std: [.inf]}}\n")
    write(d, "numbers", "seed: 0x10\ndata: {batch_size: 0o17, samples: 1e3, features: 9223372036854775807}\n")
    write(d, "nested", "data:\n  normalize:\n    mean: [[[[1]]]]\n    std: {a: {b: {c: 1}}}\n")
    write(d, "strings", 'name: "a\\tb"\noutput: {dir: "r\\u00e9sum\\u00e9 runs"}\ncheckpoint: {dir: \'it\'\'s\'}\n')
    write(d, "non-utf8", b"name: x\ndata: {root: /tmp/caf\xe9}\n")


CIFAR_RECORD = 1 + 3 * 32 * 32


def cifar_records(labels):
    return b"".join(bytes([label]) + bytes((i * 7 + label) % 256 for i in range(CIFAR_RECORD - 1)) for label in labels)


def cifar_seeds():
    d = corpus("cifar10")
    write(d, "one-record", cifar_records([3]))
    write(d, "two-records", cifar_records([0, 9]))
    write(d, "empty", b"")
    write(d, "truncated", cifar_records([1])[:-1])
    write(d, "bad-label", cifar_records([10]))
    write(d, "one-byte", b"\x05")


def idx_file(magic, sizes, payload):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", s) for s in sizes) + payload


def idx_pair(images, labels):
    """The fuzz input: the images file's length, the images file, the labels file."""
    return struct.pack(">I", len(images)) + images + labels


def idx_seeds():
    d = corpus("idx")
    count = 2
    pixels = bytes(i % 256 for i in range(count * 28 * 28))
    images = idx_file(0x803, [count, 28, 28], pixels)
    labels = idx_file(0x801, [count], bytes([4, 7]))
    write(d, "raw", idx_pair(images, labels))
    write(d, "gzip", idx_pair(gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)))
    write(d, "gzip-images-raw-labels", idx_pair(gzip.compress(images, mtime=0), labels))
    write(d, "bad-magic", idx_pair(idx_file(0x802, [count, 28, 28], pixels), labels))
    write(d, "wrong-side", idx_pair(idx_file(0x803, [count, 27, 28], pixels[: count * 27 * 28]), labels))
    write(d, "count-mismatch", idx_pair(images, idx_file(0x801, [3], bytes([1, 2, 3]))))
    write(d, "truncated", idx_pair(images[:-5], labels))
    write(d, "trailing", idx_pair(images, labels + b"\x00"))
    write(d, "bad-label", idx_pair(images, idx_file(0x801, [count], bytes([4, 12]))))
    write(d, "truncated-gzip", idx_pair(gzip.compress(images, mtime=0)[:-9], labels))
    write(d, "no-images", idx_pair(idx_file(0x803, [0, 28, 28], b""), idx_file(0x801, [0], b"")))
    write(d, "header-only", idx_pair(images[:10], labels[:3]))
    # Found by fuzzing: headers promising far more than the file holds (105 GB here).
    huge = idx_file(0x803, [0x08000002, 28, 28], b"")
    write(d, "huge-count", idx_pair(huge, labels))
    write(d, "huge-count-gzip", idx_pair(gzip.compress(huge, mtime=0), labels))


CHECKPOINT_RUN = """name: seed
seed: 1
device: cpu
data: {dataset: synthetic, samples: 16, test_samples: 8, features: 3, classes: 2, batch_size: 8,
       num_workers: 0, pin_memory: false}
model: {name: mlp, hidden: [2]}
optim: {name: adam, lr: 0.01}
train: {epochs: 1}
"""


def checkpoint_seeds(gputrain=ROOT / "build" / "release" / "app" / "gputrain"):
    """A real checkpoint of a tiny run, whole (0 + file) and as a bare payload (1 + payload: the
    target seals it), with a few damaged copies (fuzz_checkpoint.cpp)."""
    d = corpus("checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "seed.yaml"
        config.write_text(CHECKPOINT_RUN)
        subprocess.run([str(gputrain), "--log-level", "error", "train", "--config", str(config), "--output", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        whole = next((pathlib.Path(tmp) / "seed" / "checkpoints").glob("ckpt-*.ckpt")).read_bytes()
    header, payload = whole[:32], whole[32:]
    write(d, "whole", b"\x00" + whole)
    write(d, "payload", b"\x01" + payload)
    write(d, "truncated", b"\x00" + whole[: len(whole) // 2])
    write(d, "header-only", b"\x00" + header)
    write(d, "empty-payload", b"\x01")
    write(d, "flipped-payload", b"\x01" + payload[:100] + bytes([payload[100] ^ 0xFF]) + payload[101:])


def safetensors_file(header, data=b""):
    """A safetensors file: the header's length (8 bytes, little-endian), the JSON header, the tensors' bytes."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    """Files as safetensors' writers make them (fuzz_safetensors.cpp), and one of each damage the reader names."""
    d = corpus("safetensors")
    f32 = lambda shape, begin, end: {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}
    weights = struct.pack("<6f", 0.5, -1, 2, 0.25, 3, -4) + struct.pack("<q", 7)
    valid = {
        "__metadata__": {"format": "pt"},
        "fc.weight": f32([2, 2], 0, 16),
        "fc.bias": f32([2], 16, 24),
        "bn.num_batches_tracked": {"dtype": "I64", "shape": [], "data_offsets": [24, 32]},
    }
    write(d, "valid", safetensors_file(valid, weights))
    write(d, "every-dtype", safetensors_file(
        {kind: {"dtype": kind, "shape": [1], "data_offsets": [i * 8, i * 8 + size]} if size == 8 else
         {"dtype": kind, "shape": [8 // size], "data_offsets": [i * 8, i * 8 + 8]}
         for i, (kind, size) in enumerate([("BOOL", 1), ("U8", 1), ("I8", 1), ("I16", 2), ("I32", 4), ("I64", 8),
                                           ("F16", 2), ("BF16", 2), ("F32", 4), ("F64", 8)])},
        bytes([0, 1] * 4) + bytes(range(8, 80))))  # BOOL's bytes are 0 or 1
    write(d, "empty-header", safetensors_file({}))
    write(d, "zero-size", safetensors_file({"e": f32([0, 3], 0, 0)}))
    write(d, "truncated", safetensors_file(valid, weights)[:-5])
    write(d, "length-past-end", struct.pack("<Q", 1 << 40) + b"{}")
    write(d, "short", b"\x02\x00\x00")
    write(d, "overlapping", safetensors_file({"a": f32([2], 0, 8), "b": f32([2], 4, 12)}, bytes(12)))
    write(d, "gap", safetensors_file({"a": f32([1], 0, 4), "b": f32([1], 8, 12)}, bytes(12)))
    write(d, "offsets-out-of-range", safetensors_file({"a": f32([2], 0, 800)}, bytes(8)))
    write(d, "unknown-dtype", safetensors_file({"a": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]}},
                                               bytes(4)))
    write(d, "shape-mismatch", safetensors_file({"a": f32([3], 0, 8)}, bytes(8)))
    write(d, "huge-shape", safetensors_file({"a": f32([1 << 62, 1 << 62], 0, 8)}, bytes(8)))
    write(d, "invalid-json", safetensors_file(b'{"a": {"dtype": "F32",', bytes(4)))
    write(d, "non-utf8", safetensors_file(b'{"caf\xe9": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}',
                                          bytes(4)))
    write(d, "metadata-not-strings", safetensors_file({"__metadata__": {"format": 1}}))
    write(d, "bool-not-0-or-1", safetensors_file({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}},
                                                 b"\x01\x02"))


def state_dict_pickle(tensors, metadata=True):
    """data.pkl as torch.save(model.state_dict()) pickles it (protocol 2): an OrderedDict with its
    _metadata, each tensor torch._utils._rebuild_tensor_v2 over a persistent storage id. Made
    without torch, by stand-ins registered under torch's names (fuzz_state_dict.cpp)."""
    import collections
    import io
    import pickle
    import sys
    import types

    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        return args

    FloatStorage.__module__, _rebuild_tensor_v2.__module__ = "torch", "torch._utils"
    FloatStorage.__qualname__, _rebuild_tensor_v2.__qualname__ = "FloatStorage", "_rebuild_tensor_v2"
    torch.FloatStorage, utils._rebuild_tensor_v2 = FloatStorage, _rebuild_tensor_v2
    saved = {name: sys.modules.get(name) for name in ("torch", "torch._utils")}
    sys.modules.update({"torch": torch, "torch._utils": utils})

    class Storage:
        def __init__(self, key, numel):
            self.key, self.numel = key, numel

    class Tensor:
        def __init__(self, storage, size):
            self.storage, self.size = storage, size

        def __reduce__(self):
            stride = tuple(math.prod(self.size[i + 1:]) for i in range(len(self.size)))
            return _rebuild_tensor_v2, (self.storage, 0, self.size, stride, False, collections.OrderedDict())

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", FloatStorage, obj.key, "cpu", obj.numel) if isinstance(obj, Storage) else None

    state = collections.OrderedDict()
    for key, (name, size) in enumerate(tensors):
        state[name] = Tensor(Storage(str(key), math.prod(size)), size)
    if metadata:
        state._metadata = collections.OrderedDict([("", {"version": 1}), ("fc", {"version": 1})])
    out = io.BytesIO()
    try:
        Pickler(out, protocol=2).dump(state)
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module
    return out.getvalue()


def state_dict_seeds():
    """data.pkl of a state dict from Python (whose storages the target fills with 64 zero bytes:
    16 float32 values), without its _metadata, and damaged copies."""
    d = corpus("state_dict")
    valid = state_dict_pickle([("fc.weight", (4, 4))])
    write(d, "python-state-dict", valid)
    write(d, "no-metadata", state_dict_pickle([("fc.weight", (4, 4))], metadata=False))
    write(d, "two-tensors", state_dict_pickle([("fc.weight", (2, 8)), ("fc.bias", (16,))]))
    write(d, "past-its-storage", state_dict_pickle([("fc.weight", (4, 8))]))
    write(d, "truncated", valid[: len(valid) // 2])
    write(d, "empty", b"")


if __name__ == "__main__":
    config_seeds()
    cifar_seeds()
    idx_seeds()
    checkpoint_seeds()
    safetensors_seeds()
    state_dict_seeds()
