#!/usr/bin/env python3
"""PNG decoding as a request's path does it: the direct reader (server/preprocess/png_direct.h,
one zlib call per image) against libpng alone, side by side in one run.

For each kind of input the shipped models get over `bench_serving.py`'s inputs (64
Fashion-MNIST 28 x 28 PNGs, 16 Colin27 181 x 217 slices, 16 detection scenes 128 x 128, all
8-bit gray, row filter 0) and for RGB and RGBA copies of the scenes whose rows use the five
filters in turn, `build/tests/decode_images` alternates the two readers over the files on
one pinned core and checks they give the same pixels. Prints microseconds per image and
libpng / direct.

Usage: /usr/bin/python3 benchmarks/bench_png_decode.py [--core 0] [--repeat 300]
"""
import argparse
import json
import pathlib
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_serving import write_inputs  # noqa: E402

TOOL = ROOT / "build" / "tests" / "decode_images"


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _filtered(rows, bpp):
    """PNG rows [H, W * bpp] uint8, row r filtered with filter r % 5 (none, sub, up, average,
    Paeth), each row prefixed with its filter byte."""
    raw = rows.astype(np.int16)
    left = np.zeros_like(raw)
    left[:, bpp:] = raw[:, :-bpp]
    up = np.zeros_like(raw)
    up[1:] = raw[:-1]
    up_left = np.zeros_like(raw)
    up_left[1:, bpp:] = raw[:-1, :-bpp]
    p = left + up - up_left
    pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - up_left)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, up_left))
    predictors = [np.zeros_like(raw), left, up, (left + up) // 2, paeth]
    out = b""
    for r in range(raw.shape[0]):
        kind = r % 5
        out += bytes([kind]) + ((raw[r] - predictors[kind][r]) % 256).astype(np.uint8).tobytes()
    return out


def colour_copies(gray_paths, out_dir, channels):
    """The images of `gray_paths` as 8-bit RGB (3) or RGBA (4) PNGs with every row filter,
    channels made different so no reader can skip one."""
    from gatescope.data.png import decode_png
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, path in enumerate(gray_paths):
        gray = decode_png(pathlib.Path(path).read_bytes())
        planes = [gray, 255 - gray, np.roll(gray, 7, axis=1), np.full_like(gray, 200)]
        image = np.dstack(planes[:channels])
        h, w = gray.shape
        header = struct.pack(">IIBBBBB", w, h, 8, 2 if channels == 3 else 6, 0, 0, 0)
        stream = zlib.compress(_filtered(image.reshape(h, w * channels), channels), 9)
        paths.append(str(out_dir / f"{i:02d}.png"))
        pathlib.Path(paths[-1]).write_bytes(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                                            + _chunk(b"IDAT", stream) + _chunk(b"IEND", b""))
    return paths


def measure(core, repeat, paths, rgb):
    cmd = ["taskset", "-c", core, str(TOOL), "--repeat", str(repeat), *(["--rgb"] if rgb else []),
           *paths]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"decode_images failed ({out.returncode}): {out.stdout}{out.stderr}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--core", default="0")
    ap.add_argument("--repeat", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        scenes = write_inputs("object_detection", tmp / "scenes")
        kinds = [
            ("Fashion-MNIST 28 x 28 gray", write_inputs("image_classification", tmp / "fm"), False),
            ("Colin27 slice 181 x 217 gray", write_inputs("image_segmentation", tmp / "colin"),
             False),
            ("scene 128 x 128 gray", scenes, False),
            ("scene 128 x 128 RGB", colour_copies(scenes, tmp / "rgb", 3), True),
            ("scene 128 x 128 RGBA", colour_copies(scenes, tmp / "rgba", 4), True),
        ]
        rows = [(name, measure(args.core, args.repeat, paths, rgb)) for name, paths, rgb in kinds]
    print(f"Core {args.core}, {args.repeat} rounds, the two readers alternating; header reads "
          "included (a PNG's from its IHDR either way)\n")
    print("| input | files | read directly | direct us/image | libpng us/image | libpng / direct |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in rows:
        print(f"| {name} | {r['files']} | {r['direct']} | {r['served_us']:.1f} | "
              f"{r['libpng_us']:.1f} | {r['speedup']:.2f}x |")


if __name__ == "__main__":
    main()
