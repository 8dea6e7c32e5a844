"""Detection pre/post-processing shared by training, export, tests and the server's
contract: pixels / 255 normalised by (x - 0.5) / 0.5 at the image's own size (no resize,
no padding), the public Deformable-DETR post-processing (sigmoid scores, top-k over all
query-class pairs, then a score threshold) with boxes in the image's pixel coordinates
(x1, y1, x2, y2; the image spans 0..W x 0..H), and explain maps of chosen detections
mapped to the same coordinates."""
from typing import Dict, List

import numpy as np
import torch

from gatescope.networks.deformable_detr import box_cxcywh_to_xyxy

NORM_MEAN = 0.5
NORM_STD = 0.5
DEFAULT_SCORE_THRESHOLD = 0.3
DEFAULT_MAX_DETECTIONS = 100


def preprocess(image: np.ndarray) -> torch.Tensor:
    """uint8 [H, W] -> float [1, 1, H, W]."""
    x = torch.from_numpy(np.ascontiguousarray(image)).float()[None, None] / 255.0
    return (x - NORM_MEAN) / NORM_STD


def decode(logits: torch.Tensor, boxes: torch.Tensor, height: int, width: int,
           score_threshold: float = DEFAULT_SCORE_THRESHOLD,
           max_detections: int = DEFAULT_MAX_DETECTIONS) -> Dict[str, torch.Tensor]:
    """One image's logits [Q, C] and boxes [Q, 4] -> {"boxes" [K, 4] xyxy pixels,
    "scores" [K], "labels" [K], "queries" [K]}, scores descending, every score above
    score_threshold, K <= max_detections."""
    q, c = logits.shape
    prob = logits.sigmoid().reshape(q * c)
    scores, idx = prob.topk(min(max_detections, q * c))
    keep = scores > score_threshold
    scores, idx = scores[keep], idx[keep]
    queries = torch.div(idx, c, rounding_mode="floor")
    scale = torch.tensor([width, height, width, height], dtype=boxes.dtype)
    xyxy = box_cxcywh_to_xyxy(boxes[queries]) * scale
    return {"boxes": xyxy, "scores": scores, "labels": idx % c, "queries": queries}


def detect(model: torch.nn.Module, image: np.ndarray,
           score_threshold: float = DEFAULT_SCORE_THRESHOLD,
           max_detections: int = DEFAULT_MAX_DETECTIONS) -> Dict[str, torch.Tensor]:
    """Detections of a DeformableDETR (or its served wrapper) on one uint8 [H, W] image."""
    with torch.no_grad():
        out = model(preprocess(image))
    h, w = image.shape
    return decode(out["logits"][0], out["boxes"][0], h, w, score_threshold, max_detections)


def explain_detections(served: torch.nn.Module, image: np.ndarray,
                       score_threshold: float = DEFAULT_SCORE_THRESHOLD,
                       max_detections: int = DEFAULT_MAX_DETECTIONS) -> Dict[str, object]:
    """What the server's Explain computes, through the same model contract
    (gatescope.served_detector: explain_begin / explain_layer / explain_end) on one uint8
    [H, W] image: detect()'s detections plus, for each, its decoder maps stacked over
    decoder layers: sampling_points [K, Ld, M, L, P, 2] (x, y) in pixels, attention_weights
    [K, Ld, M, L, P] and, with PLuG, plug_gate [K, Ld, M, L]; and, with PLuG,
    encoder_plug_gates, per encoder layer and level, [M, L, h_k, w_k]."""
    h, w = image.shape
    enc_layers = served.net.enc_layers
    layers = enc_layers + served.net.dec_layers
    decoder: Dict[str, List[torch.Tensor]] = {}
    encoder_gates: List[torch.Tensor] = []
    with torch.no_grad():
        state = served.explain_begin(preprocess(image))
        for layer in range(layers):
            state, maps = served.explain_layer(state, layer)
            if layer < enc_layers:
                encoder_gates += [maps[f"plug_gate_level{k}"][0]
                                  for k in range(len(maps))]
            else:
                for k, v in maps.items():
                    decoder.setdefault(k, []).append(v[0])
        out = served.explain_end(state)
    dets = decode(out["logits"][0], out["boxes"][0], h, w, score_threshold, max_detections)
    q = dets["queries"]
    result: Dict[str, object] = dict(dets)
    result["sampling_points"] = torch.stack(decoder["sampling_locations"], 1)[q] \
        * torch.tensor([float(w), float(h)])
    result["attention_weights"] = torch.stack(decoder["attention_weights"], 1)[q]
    if "plug_gate" in decoder:
        result["plug_gate"] = torch.stack(decoder["plug_gate"], 1)[q]
        result["encoder_plug_gates"] = encoder_gates
    return result
