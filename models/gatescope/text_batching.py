"""Token ids for the text classifiers: truncation, length-bucketed padded batches, held-out
scores. Shared by training (models/train_text.py), export (gatescope.export.text_classifier)
and the shipped-model tests, so all three see the same ids and the same batches.

A batch is (token_ids int64 [B, T], attention_mask bool [B, T]) with T the batch's longest
sequence, ids padded with pad_id on the right and the mask False there: the
"text_classification" forward() contract (networks/text.py).
"""
import ctypes
import ctypes.util
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch


def keep_freed_memory() -> bool:
    """Makes glibc's malloc keep freed memory for reuse (mmap threshold 32 MiB, no trimming)
    instead of handing every large tensor's pages back to the kernel and faulting them in
    again on the next allocation. On the shared VMs here a page fault is so slow that this
    halves the wall time of a training step with [B, H, N, N] attention maps. Process-wide;
    returns False where it does not apply (not glibc)."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
        ok = libc.mallopt(m_mmap_threshold, 32 * 2**20)
        ok &= libc.mallopt(m_trim_threshold, 2**31 - 1)
        ok &= libc.mallopt(m_top_pad, 64 * 2**20)
        return bool(ok)
    except (OSError, AttributeError):
        return False


def encode_all(tokenizer, texts: Sequence[str], max_tokens: int
               ) -> Tuple[List[List[int]], List[int]]:
    """(ids truncated to the first max_tokens pieces, the untruncated piece counts)."""
    encoded = (tokenizer.encode_batch(list(texts)) if hasattr(tokenizer, "encode_batch")
               else [tokenizer.encode(t) for t in texts])
    full = [len(pieces) for pieces in encoded]
    return [list(pieces[:max_tokens]) for pieces in encoded], full


def length_stats(full_lengths: Sequence[int], max_tokens: int) -> Dict[str, float]:
    """Piece-count distribution and the share of texts longer than max_tokens."""
    n = np.asarray(full_lengths, dtype=np.int64)
    if n.size == 0:
        return {"count": 0}
    return {"count": int(n.size), "mean": float(n.mean()),
            "p50": float(np.percentile(n, 50)), "p90": float(np.percentile(n, 90)),
            "p99": float(np.percentile(n, 99)), "max": int(n.max()),
            "empty": int((n == 0).sum()),
            "truncated": int((n > max_tokens).sum()),
            "truncated_fraction": float((n > max_tokens).mean()),
            "pieces_kept_fraction": float(np.minimum(n, max_tokens).sum() / max(1, n.sum()))}


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = 0
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (token_ids int64 [B, T], attention_mask bool [B, T]), T = longest."""
    t = max((len(s) for s in seqs), default=0)
    ids = torch.full((len(seqs), t), pad_id, dtype=torch.int64)
    mask = torch.zeros((len(seqs), t), dtype=torch.bool)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, :len(s)] = torch.as_tensor(list(s), dtype=torch.int64)
            mask[i, :len(s)] = True
    return ids, mask


def eval_batches(lengths: Sequence[int], max_pieces: int = 8192, max_batch: int = 256
                 ) -> List[List[int]]:
    """Indices in batches of similar length (sorted), each at most max_batch examples and
    about max_pieces padded pieces; deterministic."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches, cur = [], []
    for i in order:
        t = max(1, lengths[i])  # the longest so far: order is ascending
        if cur and (len(cur) + 1) * t > max_pieces or len(cur) == max_batch:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def train_batches(lengths: Sequence[int], batch_size: int, rng: np.random.Generator,
                  pool: int = 50) -> List[List[int]]:
    """One epoch's batches: a random permutation cut into pools of pool * batch_size
    examples, each sorted by length and cut into batches, then the batches shuffled. Similar
    lengths share a batch (little padding) while the order stays random."""
    perm = rng.permutation(len(lengths))
    batches = []
    span = batch_size * pool
    for start in range(0, len(perm), span):
        chunk = sorted(perm[start:start + span].tolist(), key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    order = rng.permutation(len(batches))
    return [batches[i] for i in order]


def predict(model, seqs: Sequence[Sequence[int]], pad_id: int = 0,
            max_pieces: int = 8192, extra_outputs: Optional[Sequence[str]] = None
            ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Predicted classes [N] (in the order of seqs) of a text classifier (eager module or
    TorchScript) run on length-bucketed padded batches without gradients; also the named
    extra outputs, concatenated in the same order."""
    preds = torch.empty(len(seqs), dtype=torch.int64)
    extras: Dict[str, List[Tuple[List[int], torch.Tensor]]] = {k: [] for k in extra_outputs or []}
    with torch.no_grad():
        for idx in eval_batches([len(s) for s in seqs], max_pieces):
            ids, mask = pad_batch([seqs[i] for i in idx], pad_id)
            out = model(ids, mask)
            preds[idx] = out["logits"].argmax(-1)
            for k in extras:
                extras[k].append((idx, out[k]))
    gathered = {}
    for k, parts in extras.items():
        if parts:
            full = torch.empty((len(seqs),) + tuple(parts[0][1].shape[1:]))
            for idx, v in parts:
                full[idx] = v
            gathered[k] = full
    return preds, gathered


def scores(labels: Sequence[int], preds) -> Dict[str, float]:
    """Accuracy and macro-F1 (sklearn.metrics.f1_score, average="macro": the unweighted
    mean over the classes present in the labels or the predictions)."""
    from sklearn.metrics import f1_score
    y = np.asarray(labels)
    p = np.asarray(preds)
    return {"accuracy": float((y == p).mean()),
            "macro_f1": float(f1_score(y, p, average="macro", zero_division=0))}
