#!/usr/bin/env bash
# README command one: install what is missing, build (Release), and run the main
# job: the Fashion-MNIST MLP on the real data set from Debian's package.
# Extra arguments go to `gputrain train`, e.g. scripts/run.sh --set train.epochs=1
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/setup.sh" run  # what the program needs, not the tests' tools
"$GPUTRAIN_ROOT/scripts/build.sh" release gputrain  # the program alone: scripts/test.sh builds the tests
cd "$GPUTRAIN_ROOT"
exec build/release/app/gputrain train --config configs/fashion_mnist.yaml "$@"
