"""gputrain: train neural networks on CPUs and GPUs from YAML experiment files.

The `gputrain` command is a C++ program, bin/gputrain inside this package, that
runs on the LibTorch of the torch package installed beside it; this module only
starts it.
"""
import os
import sys


def binary():
    """The path of the gputrain program in this installation."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gputrain")


def main():
    # The program finds LibTorch through a path relative to itself: the torch
    # package must sit in the same site-packages (pip puts it there).
    torch_lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch", "lib")
    if not os.path.isdir(torch_lib):
        print(f"gputrain: no torch package beside gputrain ({torch_lib}); install it into the same environment: "
              "pip install torch==2.11.0", file=sys.stderr)
        sys.exit(2)
    # exec, not a child process: signals (Ctrl-C, a preemption notice), the
    # terminal and the exit code are the program's own, and nothing of Python
    # stays in memory.
    os.execv(binary(), ["gputrain"] + sys.argv[1:])
