#!/usr/bin/env bash
# Retrains and re-exports the shipped Fashion-MNIST models (not part of CI: ~20 min each
# on 2 cores; the two run side by side, one thread each, which is faster here than 2+2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p build/train
for arch in dgvit vit; do
  /usr/bin/python3 models/train_classifier.py --arch "$arch" --epochs 12 --patch-size 7 \
    --threads 1 --warmup-steps 300 --out "build/train/$arch" >"build/train/$arch.log" 2>&1 &
done
wait
for arch in dgvit vit; do
  /usr/bin/python3 models/export.py --ckpt "build/train/$arch.ckpt" --name "${arch}_fmnist"
done
