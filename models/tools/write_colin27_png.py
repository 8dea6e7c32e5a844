#!/usr/bin/env python3
"""Writes the held-out Colin27 MRI slices (never trained on) as PNG files for trying the
segmentation models: <out>/z<slice>.png (T1, 217 x 181) and <out>/z<slice>.labels.png
(class indices, see gatescope.data.colin27). Usage:
  /usr/bin/python3 models/tools/write_colin27_png.py --out /tmp/mri
"""
import argparse
import pathlib
import sys

from gatescope.data import colin27
from gatescope.data.png import encode_gray_png


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    test = colin27.load_slices()["test"]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for image, labels, z in zip(test["images"], test["labels"], test["z"]):
        (out / f"z{z:03d}.png").write_bytes(encode_gray_png(image))
        (out / f"z{z:03d}.labels.png").write_bytes(encode_gray_png(labels))
    print(f"wrote {len(test['z'])} slices to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
