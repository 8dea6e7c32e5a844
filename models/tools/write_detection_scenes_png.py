#!/usr/bin/env python3
"""Writes held-out detection scenes as PNG files for trying the detectors.

The scenes are those of the detectors' model cards (gatescope.data.detection_scenes,
held-out split, seed 1234: Fashion-MNIST and MNIST test images only). Writes
<out>/scene_<index>.png for scenes [start, start+count) and <out>/boxes.csv (file, x1, y1,
x2, y2 in pixels with x2/y2 exclusive, label index, label). Needs MNIST
(scripts/fetch_mnist.sh). Usage:
  /usr/bin/python3 models/tools/write_detection_scenes_png.py --out /tmp/scenes --count 10
"""
import argparse
import pathlib

from gatescope.data import detection_scenes as ds
from gatescope.data.png import encode_gray_png

HELD_OUT_SEED = 1234


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=10)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenes = ds.make_scenes("heldout", args.count, seed=HELD_OUT_SEED, start=args.start)
    with open(out / "boxes.csv", "w") as f:
        f.write("file,x1,y1,x2,y2,label,name\n")
        for i, (image, boxes, labels) in enumerate(scenes, start=args.start):
            name = f"scene_{i:04d}.png"
            (out / name).write_bytes(encode_gray_png(image))
            for box, label in zip(boxes.tolist(), labels.tolist()):
                f.write(f"{name},{','.join(str(int(v)) for v in box)},{label},{ds.LABELS[label]}\n")
    print(f"wrote {len(scenes)} scenes to {out}")


if __name__ == "__main__":
    main()
