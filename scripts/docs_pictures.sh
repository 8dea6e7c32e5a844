#!/usr/bin/env bash
# Regenerates the pictures in docs/images/ from a running server (default 127.0.0.1:8001,
# e.g. started by scripts/serve.sh): the explain panels, comparisons and detection and
# segmentation pictures that the docs show. Usage: scripts/docs_pictures.sh [HOST:PORT]
set -euo pipefail
cd "$(dirname "$0")/.."
server="${1:-127.0.0.1:8001}"
client=(build/client/gatescope-client)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

"$py" - "$work" <<'PY'
import sys, pathlib
from gatescope.data import colin27, fashion_mnist
from gatescope.data.png import encode_gray_png
out = pathlib.Path(sys.argv[1])
images, _ = fashion_mnist.load_split("t10k")
(out / "boot.png").write_bytes(encode_gray_png(images[0]))
test = colin27.load_slices()["test"]
i = list(test["z"]).index(80)
(out / "z080.png").write_bytes(encode_gray_png(test["images"][i]))
(out / "z080_labels.png").write_bytes(encode_gray_png(test["labels"][i].astype("uint8")))
PY
"$py" models/tools/write_detection_scenes_png.py --out "$work/scenes" --count 2 >/dev/null
awk -F, '$1 == "scene_0001.png" {print $2","$3","$4","$5","$6}' "$work/scenes/boxes.csv" \
  > "$work/scenes/scene_0001.csv"

run() { "${client[@]}" "$1" --server "$server" "${@:2}" >/dev/null; }
img=docs/images
run explain --compare dgvit_fmnist,diffvit_fmnist,vit_fmnist,darvit_fmnist --out "$work/c" \
  "$work/boot.png"
cp "$work/c/boot.png.compare.png" "$img/compare_rollouts.png"
run explain --compare dgvit_fmnist,diffvit_fmnist --signed raw --out "$work/raw" "$work/boot.png"
cp "$work/raw/boot.png.compare.png" "$img/compare_rollouts_signed.png"
run explain --model darvit_fmnist --rollout --resonance --out "$work/dar" "$work/boot.png"
cp "$work/dar/boot.png.panel.png" "$img/darvit_panel.png"
run explain --model pvt_gdla_colin27 --gates --query 110,60 --out "$work/seg" "$work/z080.png"
for f in mask gates query_attention; do cp "$work/seg/$f.png" "$img/pvt_gdla_z080_$f.png"; done
run explain --compare pvt_gdla_colin27,pvt_la_colin27 --query 110,60 \
  --gt "$work/z080_labels.png" --out "$work/segc" "$work/z080.png"
cp "$work/segc/z080.png.compare.png" "$img/compare_segmentation.png"
run predict --model plug_detr_scenes --out "$work/det" "$work/scenes/scene_0000.png"
cp "$work/det/boxes.png" "$img/plug_detr_scene0000_boxes.png"
run explain --model plug_detr_scenes --plug-gates --max-detections 3 --out "$work/detx" \
  "$work/scenes/scene_0001.png"
cp "$work/detx/sampling_points.png" "$img/plug_detr_scene0001_sampling_points.png"
cp "$work/detx/encoder_plug_gates.png" "$img/plug_detr_scene0001_encoder_gates.png"
run explain --compare detr_scenes,plug_detr_scenes --max-detections 3 \
  --gt "$work/scenes/scene_0001.csv" --out "$work/detc" "$work/scenes/scene_0001.png"
cp "$work/detc/scene_0001.png.compare.png" "$img/compare_detection.png"
echo "docs_pictures: wrote $(ls "$img" | wc -l) pictures under $img"
