#!/usr/bin/env python3
"""Writes Fashion-MNIST test images as PNG files for trying the server.

Writes <out>/<index>_<class>.png for test images [start, start+count) and <out>/labels.csv
(file, true label index, class name). Usage:
  /usr/bin/python3 models/tools/write_fashion_mnist_png.py --out /tmp/fmnist --count 20
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from gatescope.data import fashion_mnist  # noqa: E402
from gatescope.data.png import encode_gray_png  # noqa: E402


def write_pngs(out_dir, start=0, count=20, data_dir=fashion_mnist.DEFAULT_DIR):
    """Returns [(path, label_index)] of the files written."""
    images, labels = fashion_mnist.load_split("t10k", data_dir)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(start, min(start + count, images.shape[0])):
        name = fashion_mnist.CLASS_NAMES[labels[i]].replace("/", "-").replace(" ", "-")
        path = out / f"{i:05d}_{name}.png"
        path.write_bytes(encode_gray_png(images[i]))
        written.append((path, int(labels[i])))
    with open(out / "labels.csv", "w") as f:
        f.write("file,label,class\n")
        for path, label in written:
            f.write(f"{path.name},{label},{fashion_mnist.CLASS_NAMES[label]}\n")
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=20)
    args = ap.parse_args()
    written = write_pngs(args.out, args.start, args.count)
    print(f"wrote {len(written)} PNG files to {args.out}")


if __name__ == "__main__":
    main()
