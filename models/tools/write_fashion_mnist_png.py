#!/usr/bin/env python3
"""Writes Fashion-MNIST test images as PNG files for trying the server.

Writes <out>/<index>_<class>.png for test images [start, start+count) and <out>/labels.csv
(file, true label index, class name). Usage:
  /usr/bin/python3 models/tools/write_fashion_mnist_png.py --out /tmp/fmnist --count 20
"""
import argparse

from gatescope.data.fashion_mnist import write_pngs


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
