"""Reads TensorBoard event files with TensorBoard's own reader and prints what
it found as one JSON object: {"file_version": ..., "scalars": {tag: [[step, value], ...]}}.

Usage: read_events.py EVENT_DIR. Exits 3 when the tensorboard package is missing.
"""
import json
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as error:
    print(f"tensorboard is not installed: {error}", file=sys.stderr)
    sys.exit(3)

accumulator = event_accumulator.EventAccumulator(
    sys.argv[1], size_guidance={event_accumulator.SCALARS: 0}  # 0: keep every event
)
accumulator.Reload()
print(json.dumps({
    "file_version": accumulator.file_version,
    "scalars": {
        tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    },
}))
