"""Runs every ONNX model gputrain exported under DIR with ONNX Runtime and
prints, as one JSON object, what it found per model:
{name: {"max_abs": ..., "single_max_abs": ..., "batch": ..., "output": ..., "metadata": {...}}}
(a difference is null where the shapes differ or a value is not finite).
Each DIR/<name>/ holds model.onnx, input.npy (what goes in) and expected.npy
(gputrain's own outputs for it). "single_max_abs" runs the first sample alone:
the batch is a dynamic dimension.

Usage: onnx_check.py DIR. Exits 3 when the onnxruntime package is missing.
"""
import json
import os
import sys

import numpy as np

try:
    import onnxruntime
except ImportError as error:
    print(f"onnxruntime is not installed: {error}", file=sys.stderr)
    sys.exit(3)


def difference(outputs, expected):
    """The largest absolute difference; None where the shapes differ or a value is not finite."""
    if outputs.shape != expected.shape:
        return None
    largest = float(np.abs(outputs - expected).max())
    return largest if np.isfinite(largest) else None


def check(folder):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        os.path.join(folder, "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    inputs = np.load(os.path.join(folder, "input.npy"))
    expected = np.load(os.path.join(folder, "expected.npy"))
    name = session.get_inputs()[0].name
    outputs = session.run(None, {name: inputs})[0]
    single = session.run(None, {name: inputs[:1]})[0]
    return {
        "max_abs": difference(outputs, expected),
        "shape": list(outputs.shape),
        "single_max_abs": difference(single, expected[:1]),
        "batch": session.get_inputs()[0].shape[0],
        "input": name,
        "output": session.get_outputs()[0].name,
        "metadata": session.get_modelmeta().custom_metadata_map,
    }


def main():
    root = sys.argv[1]
    found = {name: check(os.path.join(root, name)) for name in sorted(os.listdir(root))}
    print(json.dumps(found, allow_nan=False))


if __name__ == "__main__":
    main()
