#!/usr/bin/env bash
# Retrains and re-exports the shipped Fashion-MNIST models (not part of CI: ~20 min each
# on 2 cores; two run side by side, one thread each, which is faster here than 2+2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p build/train
# name:architecture flags
MODELS=("dgvit:--arch dgvit" "vit:--arch vit" "darvit:--arch vit --dar" "diffvit:--arch diffvit")
train() {
  local name=${1%%:*} flags=${1#*:}
  # shellcheck disable=SC2086
  /usr/bin/python3 models/train_classifier.py $flags --epochs 12 --patch-size 7 --threads 1 \
    --warmup-steps 300 --out "build/train/$name" >"build/train/$name.log" 2>&1
}
for pair in "0 1" "2 3"; do
  for i in $pair; do train "${MODELS[$i]}" & done
  wait
done
for spec in "${MODELS[@]}"; do
  name=${spec%%:*}
  /usr/bin/python3 models/export.py --ckpt "build/train/$name.ckpt" --name "${name}_fmnist"
done
