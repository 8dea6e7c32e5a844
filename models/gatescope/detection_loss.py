"""Deformable-DETR training loss and COCO-style AP for gatescope.networks.deformable_detr.

* linear_sum_assignment(cost): exact minimum-cost assignment of a rectangular matrix (the
  Hungarian algorithm with potentials, O(n^2 m), rows <= columns after an internal
  transpose); scipy is not a dependency.
* HungarianMatcher: the public focal-style matcher (cost_class 2, cost_bbox 5, cost_giou 2;
  alpha 0.25, gamma 2).
* SetCriterion / detection_loss: sigmoid focal classification loss (alpha 0.25, gamma 2,
  summed and divided by the number of target boxes, as the public loss_labels), L1 and
  1 - GIoU box losses over the matched pairs divided by the number of target boxes; total
  = 2 * loss_ce + 5 * loss_bbox + 2 * loss_giou (the public weights). No aux loss.
* average_precision(preds, targets): COCO-style AP (IoU 0.50:0.05:0.95, 101-point
  interpolated precision, greedy matching by descending score, per class then averaged over
  the classes with ground truth), AP50 and AP75. No area ranges, no crowd, all detections
  given are used (cap them with gatescope.detection.decode's max_detections).

Targets: dicts with "labels" int64 [K] and "boxes_cxcywh" float [K, 4] normalised (the
collate_scenes format) for the loss; "boxes" xyxy pixels and "labels" for AP.
"""
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F


# ------------------------------------------------------------------ boxes
def box_cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)


def box_area(b: torch.Tensor) -> torch.Tensor:
    return (b[:, 2] - b[:, 0]).clamp(min=0) * (b[:, 3] - b[:, 1]).clamp(min=0)


def box_iou(a: torch.Tensor, b: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Pairwise IoU [N, M] and union of xyxy boxes."""
    area_a, area_b = box_area(a), box_area(b)
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / union.clamp(min=1e-12), union


def generalized_box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    iou, union = box_iou(a, b)
    lt = torch.min(a[:, None, :2], b[None, :, :2])
    rb = torch.max(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[..., 0] * wh[..., 1]
    return iou - (area - union) / area.clamp(min=1e-12)


# ------------------------------------------------------------------ assignment
def linear_sum_assignment(cost) -> Tuple[np.ndarray, np.ndarray]:
    """Exact min-cost assignment of a [n, m] matrix; returns (rows, cols) sorted by row,
    min(n, m) pairs (as scipy.optimize.linear_sum_assignment)."""
    c = np.asarray(cost, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError("cost must be 2-D")
    if not np.all(np.isfinite(c)):
        raise ValueError("cost contains non-finite entries")
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = c.T
    n, m = c.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # Hungarian with potentials, 1-based (row 0 / column 0 are sentinels).
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)  # p[j]: row assigned to column j
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = c[i0 - 1, :] - u[i0] - v[1:]
            upd = free & (cur < minv[1:])
            minv[1:][upd] = cur[upd]
            way[1:][upd] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            used_idx = np.flatnonzero(used)
            u[p[used_idx]] += delta
            v[used_idx] -= delta
            minv[1:][free] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while True:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
            if j0 == 0:
                break
    cols = np.flatnonzero(p[1:] != 0)
    rows = p[1:][cols] - 1
    if transposed:
        rows, cols = cols, rows
    order = np.argsort(rows)
    return rows[order].astype(np.int64), cols[order].astype(np.int64)


class HungarianMatcher:
    def __init__(self, cost_class: float = 2.0, cost_bbox: float = 5.0,
                 cost_giou: float = 2.0, alpha: float = 0.25, gamma: float = 2.0):
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou
        self.alpha, self.gamma = alpha, gamma

    @torch.no_grad()
    def __call__(self, logits: torch.Tensor, boxes: torch.Tensor,
                 targets: Sequence[Dict[str, torch.Tensor]]
                 ) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for i, t in enumerate(targets):
            tgt_ids, tgt_box = t["labels"], t["boxes_cxcywh"].to(boxes.dtype)
            if tgt_ids.numel() == 0:
                e = torch.zeros(0, dtype=torch.int64)
                out.append((e, e))
                continue
            prob = logits[i].sigmoid()
            neg = (1 - self.alpha) * prob ** self.gamma * (-(1 - prob + 1e-8).log())
            pos = self.alpha * (1 - prob) ** self.gamma * (-(prob + 1e-8).log())
            c_class = pos[:, tgt_ids] - neg[:, tgt_ids]
            c_bbox = torch.cdist(boxes[i], tgt_box, p=1)
            c_giou = -generalized_box_iou(box_cxcywh_to_xyxy(boxes[i]),
                                          box_cxcywh_to_xyxy(tgt_box))
            c = self.cost_bbox * c_bbox + self.cost_class * c_class + self.cost_giou * c_giou
            r, col = linear_sum_assignment(c.cpu().numpy())
            out.append((torch.as_tensor(r), torch.as_tensor(col)))
        return out


def sigmoid_focal_loss(inputs: torch.Tensor, targets: torch.Tensor, alpha: float = 0.25,
                       gamma: float = 2.0) -> torch.Tensor:
    """Elementwise focal loss (not reduced)."""
    prob = inputs.sigmoid()
    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = prob * targets + (1 - prob) * (1 - targets)
    loss = ce * (1 - p_t) ** gamma
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return loss


class SetCriterion:
    def __init__(self, num_classes: int, matcher: HungarianMatcher = None,
                 weight_ce: float = 2.0, weight_bbox: float = 5.0, weight_giou: float = 2.0,
                 focal_alpha: float = 0.25):
        self.num_classes = num_classes
        self.matcher = matcher if matcher is not None else HungarianMatcher()
        self.weights = {"loss_ce": weight_ce, "loss_bbox": weight_bbox,
                        "loss_giou": weight_giou}
        self.focal_alpha = focal_alpha

    def __call__(self, outputs: Dict[str, torch.Tensor],
                 targets: Sequence[Dict[str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
        logits, boxes = outputs["logits"], outputs["boxes"]
        indices = self.matcher(logits, boxes, targets)
        num_boxes = max(float(sum(int(t["labels"].numel()) for t in targets)), 1.0)
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for src, _ in indices])
        onehot = torch.zeros_like(logits)
        tgt_labels = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
        onehot[batch_idx, src_idx, tgt_labels] = 1.0
        # public: focal(..).mean(1).sum() / num_boxes * Q  ==  sum / num_boxes
        loss_ce = sigmoid_focal_loss(logits, onehot, self.focal_alpha).sum() / num_boxes
        src_boxes = boxes[batch_idx, src_idx]
        tgt_boxes = torch.cat([t["boxes_cxcywh"][j] for t, (_, j) in zip(targets, indices)]
                              ).to(src_boxes.dtype)
        loss_bbox = F.l1_loss(src_boxes, tgt_boxes, reduction="sum") / num_boxes
        giou = torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                              box_cxcywh_to_xyxy(tgt_boxes)))
        loss_giou = (1 - giou).sum() / num_boxes
        losses = {"loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou}
        losses["loss"] = sum(self.weights[k] * v for k, v in losses.items())
        return losses


def detection_loss(outputs: Dict[str, torch.Tensor], targets: Sequence[Dict[str, torch.Tensor]],
                   num_classes: int) -> Dict[str, torch.Tensor]:
    return SetCriterion(num_classes)(outputs, targets)


# ------------------------------------------------------------------ AP
def _ap_one(scores: np.ndarray, tp: np.ndarray, n_gt: int) -> float:
    """101-point interpolated AP of detections (already sorted by descending score)."""
    if n_gt == 0:
        return float("nan")
    if tp.size == 0:
        return 0.0
    tps = np.cumsum(tp)
    fps = np.cumsum(1 - tp)
    recall = tps / n_gt
    precision = tps / np.maximum(tps + fps, np.finfo(np.float64).eps)
    # precision envelope
    for i in range(precision.size - 1, 0, -1):
        precision[i - 1] = max(precision[i - 1], precision[i])
    rec_thrs = np.linspace(0.0, 1.0, 101)
    idx = np.searchsorted(recall, rec_thrs, side="left")
    q = np.zeros(101)
    ok = idx < precision.size
    q[ok] = precision[idx[ok]]
    return float(q.mean())


def average_precision(preds: Sequence[Dict[str, torch.Tensor]],
                      targets: Sequence[Dict[str, torch.Tensor]],
                      iou_thresholds: Sequence[float] = None) -> Dict[str, float]:
    """preds: per image {"boxes" xyxy [N, 4], "scores" [N], "labels" [N]}; targets: per image
    {"boxes" xyxy [K, 4], "labels" [K]} (same coordinates). Returns {"AP", "AP50", "AP75"}
    (AP over iou_thresholds, default 0.50:0.05:0.95; AP50/AP75 at 0.5/0.75) and "ap_per_iou".
    Classes without ground truth are left out of the mean (as COCO)."""
    if iou_thresholds is None:
        iou_thresholds = np.linspace(0.5, 0.95, 10)
    thrs = [float(t) for t in iou_thresholds]
    for extra in (0.5, 0.75):
        if not any(abs(t - extra) < 1e-9 for t in thrs):
            thrs.append(extra)
    classes = sorted({int(c) for t in targets for c in t["labels"].tolist()})
    per_thr = {t: [] for t in thrs}
    for cls in classes:
        n_gt = 0
        dets = []  # (score, image, box)
        gts = []
        for img, (p, t) in enumerate(zip(preds, targets)):
            gmask = t["labels"] == cls
            g = t["boxes"][gmask].double()
            gts.append(g)
            n_gt += int(g.shape[0])
            pmask = p["labels"] == cls
            for s, b in zip(p["scores"][pmask].tolist(), p["boxes"][pmask].double()):
                dets.append((s, img, b))
        order = sorted(range(len(dets)), key=lambda k: -dets[k][0])  # stable, as COCO
        scores = np.array([dets[k][0] for k in order])
        ious = [box_iou(dets[k][2][None], gts[dets[k][1]])[0][0].numpy()
                if gts[dets[k][1]].shape[0] else np.zeros(0) for k in order]
        for thr in thrs:
            taken = [np.zeros(g.shape[0], dtype=bool) for g in gts]
            tp = np.zeros(len(order))
            for n, k in enumerate(order):
                img = dets[k][1]
                iou = ious[n]
                best, best_j = min(thr, 1 - 1e-10), -1
                for j in range(iou.size):
                    if taken[img][j] or iou[j] < best:
                        continue
                    best, best_j = iou[j], j
                if best_j >= 0:
                    taken[img][best_j] = True
                    tp[n] = 1
            per_thr[thr].append(_ap_one(scores, tp, n_gt))
    mean = {t: (float(np.mean(v)) if v else float("nan")) for t, v in per_thr.items()}
    main = [mean[float(t)] for t in iou_thresholds]
    def at(x: float) -> float:
        return mean[min(thrs, key=lambda t: abs(t - x))]
    return {"AP": float(np.mean(main)), "AP50": at(0.5), "AP75": at(0.75),
            "ap_per_iou": {t: mean[t] for t in thrs}}
