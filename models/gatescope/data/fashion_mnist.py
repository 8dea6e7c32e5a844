"""Reads Fashion-MNIST from Debian's dataset-fashion-mnist package (gzipped IDX files)."""
import gzip
import pathlib
import struct

import numpy as np

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
