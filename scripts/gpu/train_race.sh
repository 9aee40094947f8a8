#!/usr/bin/env bash
# Issue 41's races on the GPU machine, run from the bundle (bundle.sh with GPUTRAIN_BUNDLE_WHEELS=1)
# with LD_LIBRARY_PATH as for prove.sh. The machine has torch but not torchvision or pillow: the
# bundle carries their wheels (bundle DIR/wheels), installed here into /tmp without their
# dependencies. Then, in this order, each bounded by its own timeout:
#   1. a folder of IMAGES generated JPEGs of 256-500 px (scripts/bench/make_image_folder.py);
#   2. the loader race on up to 16 cores (loader_race.py), gputrain's loader alone against torchvision's;
#   3. the training race (train_race.py --device cuda): ResNet-18 and ResNet-50 trained from the
#      folder by gputrain (bf16, channels-last, CUDA graph) against torchvision's models with
#      DataLoader, bf16 autocast, channels-last and fused SGD, torch.compile off and then on
#      (mode default: max-autotune's search takes longer than a call allows).
# Results land in OUT: the races' .md/.json and each step's log.
#
#   train_race.sh OUT [IMAGES (6400)] [BATCH (128)] [WORKERS (12)] [TIMEOUT_S per step (150)]
set -uo pipefail
OUT="$1"
IMAGES="${2:-6400}"
BATCH="${3:-128}"
WORKERS="${4:-12}"
STEP_TIMEOUT="${5:-150}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUT"

python3 -m pip install --quiet --no-deps --target /tmp/race-pydeps "$HERE"/wheels/*.whl >"$OUT/pip.log" 2>&1 ||
  { echo "train_race.sh: installing the bundled wheels failed (pip.log)"; exit 1; }
export PYTHONPATH="/tmp/race-pydeps${PYTHONPATH:+:$PYTHONPATH}"
ROOT=/tmp/race-jpeg
start=$(date +%s)
# An eighth of the images generated (about 40 ms each on one core), then each class folder linked
# seven more times under other class names: every file is still decoded per batch.
timeout "$STEP_TIMEOUT" python3 "$HERE/scripts/bench/make_image_folder.py" "$ROOT" --train "$((IMAGES / 8))" \
  --test 64 --classes 10 >"$OUT/make-folder.log" 2>&1
made=$?
for copy in 1 2 3 4 5 6 7; do
  for class in "$ROOT"/train/class0??; do cp -al "$class" "${class}_$copy"; done
done
echo "make_image_folder.py: exit $made after $(($(date +%s) - start)) s; $(find "$ROOT/train" -name '*.jpg' | wc -l) training files" \
  | tee "$OUT/steps.txt"

start=$(date +%s)
CORES=$(nproc)
[ "$CORES" -gt 16 ] && CORES=16
timeout "$STEP_TIMEOUT" python3 "$HERE/scripts/bench/loader_race.py" --root "$ROOT" --cores "$CORES" --batch "$BATCH" \
  --steps 30 --warmup 3 --reps 2 --gputrain "$HERE/gputrain" --out "$OUT" >"$OUT/loader-race.log" 2>&1
echo "loader_race.py: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/steps.txt"

for compile in none default; do
  start=$(date +%s)
  timeout "$STEP_TIMEOUT" python3 "$HERE/scripts/bench/train_race.py" --root "$ROOT" --device cuda \
    --models resnet18,resnet50 --batch "$BATCH" --steps 30 --warmup 10 --workers "$WORKERS" --compile "$compile" \
    --gputrain "$HERE/gputrain" --configs "$HERE/configs" --out "$OUT/compile-$compile" \
    >"$OUT/train-race-$compile.log" 2>&1
  echo "train_race.py --compile $compile: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/steps.txt"
done
grep -h "gputrain / torchvision\|^| resnet" "$OUT"/*.md "$OUT"/compile-*/*.md 2>/dev/null
