"""Runs every model gputrain exported under DIR with its reader and prints, as
one JSON object, what it found per case: {name: {"onnx": {...}, "pytorch": {...},
"safetensors": {...}}}. Each DIR/<name>/ holds input.npy (what goes in),
expected.npy (gputrain's own outputs for it), expected_first.npy (gputrain's
outputs for the first sample alone) and the exports:
- model.onnx, run by ONNX Runtime: "max_abs", "single_max_abs" (the first
  sample alone, against gputrain's outputs for it alone: the batch is a
  dynamic dimension, and LibTorch's CPU kernels round a batch of one
  differently from a larger one, in gputrain as in PyTorch), "batch", "input",
  "output", "metadata", "scale" (the largest magnitude of expected.npy);
- model.py with its state dict model.pt: the module imported, Model() loading
  torch.load("model.pt") with strict=True, evaluated: "max_abs",
  "single_max_abs", "scale" (the largest magnitude of expected.npy),
  "persistent_buffers" (the state dict's keys it lacks or adds);
- weights.safetensors, read by the safetensors package: "equal" (the same
  names and values as model.pt), "metadata"; and python.safetensors written
  by it from model.pt, for gputrain to read back.
A difference is null where the shapes differ or a value is not finite.

Usage: export_check.py DIR. Exits 3 when onnxruntime, torch or safetensors is missing.
"""
import importlib.util
import json
import os
import sys

import numpy as np

try:
    import onnxruntime
    import safetensors.torch
    import torch
except ImportError as error:
    print(f"a reader is not installed: {error}", file=sys.stderr)
    sys.exit(3)


def difference(outputs, expected):
    """The largest absolute difference; None where the shapes differ or a value is not finite."""
    if outputs.shape != expected.shape:
        return None
    largest = float(np.abs(outputs - expected).max())
    return largest if np.isfinite(largest) else None


def check_onnx(folder, inputs, expected, first):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        os.path.join(folder, "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    name = session.get_inputs()[0].name
    outputs = session.run(None, {name: inputs})[0]
    single = session.run(None, {name: inputs[:1]})[0]
    return {
        "max_abs": difference(outputs, expected),
        "shape": list(outputs.shape),
        "single_max_abs": difference(single, first),
        "scale": float(np.abs(expected).max()),
        "batch": session.get_inputs()[0].shape[0],
        "input": name,
        "output": session.get_outputs()[0].name,
        "metadata": session.get_modelmeta().custom_metadata_map,
    }


def check_pytorch(folder, inputs, expected, first):
    spec = importlib.util.spec_from_file_location(f"exported_{os.path.basename(folder)}", os.path.join(folder, "model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model()
    state_dict = torch.load(os.path.join(folder, "model.pt"))
    model.load_state_dict(state_dict)  # strict: every key, no other
    model.eval()
    with torch.no_grad():
        outputs = model(torch.from_numpy(inputs)).numpy()
        single = model(torch.from_numpy(inputs[:1])).numpy()
    return {
        "max_abs": difference(outputs, expected),
        "shape": list(outputs.shape),
        "single_max_abs": difference(single, first),
        "scale": float(np.abs(expected).max()),
        "persistent_buffers": sorted(set(model.state_dict()) ^ set(state_dict)),
        "class_names": module.CLASS_NAMES,
    }


def check_safetensors(folder):
    state_dict = torch.load(os.path.join(folder, "model.pt"))
    path = os.path.join(folder, "weights.safetensors")
    read = safetensors.torch.load_file(path)
    with safetensors.safe_open(path, framework="pt") as file:
        metadata = file.metadata()
    safetensors.torch.save_file(state_dict, os.path.join(folder, "python.safetensors"), metadata={"writer": "python"})
    return {
        "equal": read.keys() == state_dict.keys() and all(torch.equal(read[k], state_dict[k]) for k in read),
        "metadata": metadata,
    }


def check(folder):
    inputs = np.load(os.path.join(folder, "input.npy"))
    expected = np.load(os.path.join(folder, "expected.npy"))
    first = np.load(os.path.join(folder, "expected_first.npy"))
    found = {}
    if os.path.exists(os.path.join(folder, "model.onnx")):
        found["onnx"] = check_onnx(folder, inputs, expected, first)
    if os.path.exists(os.path.join(folder, "model.py")):
        found["pytorch"] = check_pytorch(folder, inputs, expected, first)
    if os.path.exists(os.path.join(folder, "weights.safetensors")):
        found["safetensors"] = check_safetensors(folder)
    return found


def main():
    torch.set_num_threads(1)
    root = sys.argv[1]
    found = {name: check(os.path.join(root, name)) for name in sorted(os.listdir(root))}
    print(json.dumps(found, allow_nan=False))


if __name__ == "__main__":
    main()
