"""The benchmark scripts' way of running a side: a command whose last stdout line is one JSON object."""
import json
import subprocess
import sys


def last_json(command, what):
    """Runs `command`; returns its last stdout line as JSON, or exits naming `what` with the end of its stderr."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
