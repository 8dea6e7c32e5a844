"""Reads Fashion-MNIST from Debian's dataset-fashion-mnist package (gzipped IDX files)."""
import gzip
import pathlib
import struct

import numpy as np

from gatescope.data.png import encode_gray_png

DEFAULT_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
CLASS_NAMES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
               "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
# Mean and std of the training images scaled to [0, 1].
MEAN = 0.2860
STD = 0.3530


def read_idx(path) -> np.ndarray:
    """Parses an IDX file (optionally gzipped) into a numpy array of its declared shape."""
    path = pathlib.Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    dtype_code, ndim = data[2], data[3]
    if dtype_code != 0x08:
        raise ValueError(f"{path}: only unsigned byte IDX is supported")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(dims)):
        raise ValueError(f"{path}: truncated")
    return arr.reshape(dims)


def load_split(split: str, root=DEFAULT_DIR):
    """Returns (images uint8 [N,28,28], labels uint8 [N]) for split 'train' or 't10k'."""
    root = pathlib.Path(root)
    images = read_idx(root / f"{split}-images-idx3-ubyte.gz")
    labels = read_idx(root / f"{split}-labels-idx1-ubyte.gz")
    if images.shape[0] != labels.shape[0]:
        raise ValueError("image and label counts differ")
    return images, labels


def write_pngs(out_dir, start=0, count=20, data_dir=DEFAULT_DIR):
    """Writes test images [start, start + count) as <out_dir>/<index>_<class>.png and
    <out_dir>/labels.csv (file, true label index, class name); returns [(path,
    label_index)] of the files written."""
    images, labels = load_split("t10k", data_dir)
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(start, min(start + count, images.shape[0])):
        name = CLASS_NAMES[labels[i]].replace("/", "-").replace(" ", "-")
        path = out / f"{i:05d}_{name}.png"
        path.write_bytes(encode_gray_png(images[i]))
        written.append((path, int(labels[i])))
    with open(out / "labels.csv", "w") as f:
        f.write("file,label,class\n")
        for path, label in written:
            f.write(f"{path.name},{label},{CLASS_NAMES[label]}\n")
    return written
