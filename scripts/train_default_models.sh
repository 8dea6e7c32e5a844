#!/usr/bin/env bash
# Retrains and re-exports the shipped models (not part of CI): the Fashion-MNIST
# classifiers (~20 min each on 2 cores) and the Colin27 MRI segmenters (PVT-GDLA and its
# linear-attention baseline, ~35 min each) and the detectors (~45 min each). Two run side
# by side, one thread each, which is faster here than 2+2.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p build/train
# name:architecture flags
MODELS=("dgvit:--arch dgvit" "vit:--arch vit" "darvit:--arch vit --dar" "diffvit:--arch diffvit"
        "deit:--arch deit" "plug_deit:--arch plug_deit")
train() {
  local name=${1%%:*} flags=${1#*:}
  # shellcheck disable=SC2086
  /usr/bin/python3 models/train_classifier.py $flags --epochs 12 --patch-size 7 --threads 1 \
    --warmup-steps 300 --out "build/train/$name" >"build/train/$name.log" 2>&1
}
for pair in "0 1" "2 3" "4 5"; do
  for i in $pair; do train "${MODELS[$i]}" & done
  wait
done
for spec in "${MODELS[@]}"; do
  name=${spec%%:*}
  /usr/bin/python3 models/export.py --ckpt "build/train/$name.ckpt" --name "${name}_fmnist"
done
# Segmentation: PVT-GDLA and the PVT-LinearAttn baseline, same recipe, then one card run
# that evaluates both on the held-out slices.
pids=()
for d in gdla la; do
  /usr/bin/python3 models/train_segmenter.py --decoder "$d" --variant b0 --epochs 80 --threads 1 \
    --out "build/train/pvt_$d.ckpt" >"build/train/pvt_$d.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done   # fails the script if a training run failed
/usr/bin/python3 models/convert_gdla.py --ckpt build/train/pvt_gdla.ckpt --name pvt_gdla_colin27
/usr/bin/python3 models/convert_gdla.py --ckpt build/train/pvt_la.ckpt --name pvt_la_colin27
/usr/bin/python3 models/segmentation_card.py --models pvt_gdla_colin27 pvt_la_colin27

# Detection: PLuG Deformable DETR and the plain baseline, same recipe (~45 min each), on
# generated Fashion-MNIST/MNIST scenes; the checkpoints are kept in models/checkpoints/ and
# each card compares the two.
scripts/fetch_mnist.sh
pids=()
for kind in plug plain; do
  flag=(); [ "$kind" = plug ] && flag=(--plug)
  out=models/checkpoints/$([ "$kind" = plug ] && echo plug_detr_scenes || echo detr_scenes).ckpt
  /usr/bin/python3 models/train_detector.py "${flag[@]}" --steps 6000 --threads 1 --out "$out" \
    >"build/train/detr_$kind.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
/usr/bin/python3 models/export_detector.py --ckpt models/checkpoints/plug_detr_scenes.ckpt \
  --name plug_detr_scenes --baseline models/checkpoints/detr_scenes.ckpt
/usr/bin/python3 models/export_detector.py --ckpt models/checkpoints/detr_scenes.ckpt \
  --name detr_scenes --baseline models/checkpoints/plug_detr_scenes.ckpt

# Last, once every card is rewritten: the cards' drift references (per-layer gate /
# vigilance / PLuG / GDLA statistics over each model's held-out data), which the server
# exports, and the check that the drift rules (deploy/monitoring/) cover every statistic.
/usr/bin/python3 models/monitoring_reference.py
/usr/bin/python3 deploy/monitoring/drift_rules.py --check
