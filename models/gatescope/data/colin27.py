"""Axial slices of the Colin27 MRI from Debian's mricron-data, with tissue labels.

Sources (all 181 x 217 x 181, 1 mm, uint8, same grid): ch2 (T1 head), ch2bet (brain
extracted: >0 is brain) and aal (AAL atlas, regions 1..116). Classes:
    0 background   outside the brain
    1 other brain  brain without an AAL grey-matter label (white matter, CSF, stem)
    2 cortex       AAL cerebral cortex regions (1-70, 79-90)
    3 deep grey    caudate, putamen, pallidum, thalamus (AAL 71-78)
    4 cerebellum   cerebellar hemispheres and vermis (AAL 91-116)
Slices are [H = 217 (posterior->anterior flipped so anterior is up), W = 181]. The
held-out split is three slabs of axial slices; training excludes GAP slices on each side
of every slab, so no training slice neighbours a held-out one.
"""
import gzip
import pathlib
import struct
from typing import Dict, List, Tuple

import numpy as np

TEMPLATES = pathlib.Path("/usr/share/mricron/templates")
CLASS_NAMES = ["background", "other brain", "cortex", "deep grey", "cerebellum"]
HELD_OUT_SLABS: List[Tuple[int, int]] = [(36, 45), (76, 85), (116, 125)]  # inclusive z
GAP = 4
MIN_BRAIN_PIXELS = 300


def read_nifti_gz(path) -> np.ndarray:
    """A gzipped NIfTI-1 uint8 volume as [X, Y, Z] (x fastest on disk)."""
    raw = gzip.open(path).read()
    if struct.unpack("<i", raw[0:4])[0] != 348:
        raise ValueError(f"{path}: not a little-endian NIfTI-1 file")
    dims = struct.unpack("<8h", raw[40:56])
    datatype = struct.unpack("<h", raw[70:72])[0]
    if dims[0] != 3 or datatype != 2:
        raise ValueError(f"{path}: expected a 3-D uint8 volume")
    offset = int(struct.unpack("<f", raw[108:112])[0])
    x, y, z = dims[1:4]
    data = np.frombuffer(raw, np.uint8, offset=offset, count=x * y * z)
    return data.reshape(z, y, x).transpose(2, 1, 0)


def label_volume(bet: np.ndarray, aal: np.ndarray) -> np.ndarray:
    labels = np.zeros(aal.shape, np.uint8)
    labels[(bet > 0) | (aal > 0)] = 1
    labels[((aal >= 1) & (aal <= 70)) | ((aal >= 79) & (aal <= 90))] = 2
    labels[(aal >= 71) & (aal <= 78)] = 3
    labels[aal >= 91] = 4
    return labels


def axial(volume: np.ndarray, z: int) -> np.ndarray:
    return np.ascontiguousarray(volume[:, :, z].T[::-1])


def split_of(z: int) -> str:
    """'test' inside a held-out slab, 'gap' within GAP of one, else 'train'."""
    for lo, hi in HELD_OUT_SLABS:
        if lo <= z <= hi:
            return "test"
    for lo, hi in HELD_OUT_SLABS:
        if lo - GAP <= z <= hi + GAP:
            return "gap"
    return "train"


def load_slices(root=TEMPLATES) -> Dict[str, Dict[str, np.ndarray]]:
    """{'train'|'test': {'images' uint8 [S, 217, 181], 'labels' uint8 [...], 'z' [S]}} over
    slices with at least MIN_BRAIN_PIXELS brain pixels."""
    root = pathlib.Path(root)
    t1 = read_nifti_gz(root / "ch2.nii.gz")
    labels = label_volume(read_nifti_gz(root / "ch2bet.nii.gz"),
                          read_nifti_gz(root / "aal.nii.gz"))
    out: Dict[str, Dict[str, list]] = {s: {"images": [], "labels": [], "z": []}
                                       for s in ("train", "test")}
    for z in range(t1.shape[2]):
        split = split_of(z)
        lab = axial(labels, z)
        if split == "gap" or (lab > 0).sum() < MIN_BRAIN_PIXELS:
            continue
        out[split]["images"].append(axial(t1, z))
        out[split]["labels"].append(lab)
        out[split]["z"].append(z)
    return {s: {k: np.stack(v) for k, v in d.items()} for s, d in out.items()}
