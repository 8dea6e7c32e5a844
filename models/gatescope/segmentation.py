"""Segmentation pre/post-processing shared by training, export, tests and the server's
contract: bilinear resize to the model's input size (align_corners=False), per-image
min-max scaling to [0, 1], logits resized back to the original size, argmax. Dice."""
from typing import List, Tuple

import torch
import torch.nn.functional as F

MINMAX_EPS = 1e-6


def preprocess(images: torch.Tensor, size: Tuple[int, int]) -> torch.Tensor:
    """images [B, C, H0, W0] (any real dtype) -> float [B, C, *size] min-max scaled per
    image (over all its channels and pixels)."""
    x = images.float()
    if (x.shape[2], x.shape[3]) != tuple(size):
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    flat = x.reshape(x.shape[0], -1)
    lo = flat.min(dim=1).values.view(-1, 1, 1, 1)
    hi = flat.max(dim=1).values.view(-1, 1, 1, 1)
    return (x - lo) / (hi - lo + MINMAX_EPS)


def logits_at(logits: torch.Tensor, size: Tuple[int, int]) -> torch.Tensor:
    if (logits.shape[2], logits.shape[3]) == tuple(size):
        return logits
    return F.interpolate(logits, size=size, mode="bilinear", align_corners=False)


def segment(model: torch.nn.Module, images: torch.Tensor,
            input_size: Tuple[int, int]) -> torch.Tensor:
    """Class map [B, H0, W0] (int64) of images [B, C, H0, W0] at their own size."""
    logits = model(preprocess(images, input_size))
    return logits_at(logits, (images.shape[2], images.shape[3])).argmax(dim=1)


def dice_per_class(pred: torch.Tensor, target: torch.Tensor, n_classes: int) -> List[float]:
    """Dice of each class over all pixels given (NaN where a class is absent in both)."""
    out = []
    for c in range(n_classes):
        p, t = pred == c, target == c
        denom = int(p.sum()) + int(t.sum())
        out.append(float("nan") if denom == 0 else 2.0 * int((p & t).sum()) / denom)
    return out
