"""Reference values of a classifier's served per-layer statistics, written into its card.

The server observes, per served example, the model's per-layer statistics outputs
("gate_mean" for M-DGSA, "vigilance_mean" for DAR) in Prometheus histograms
(`gatescope_gate_mean`, `gatescope_vigilance_crossing`). Drift alerts compare the served mean
of each layer with the mean over the held-out test set, recorded here in the model card
(README.md) as a table and a machine-readable block that `deploy/monitoring/drift_rules.py`
turns into recording rules.
"""
import json
import pathlib
import re
from typing import Dict, List

import numpy as np
import torch

from gatescope.export.archive import read_metadata

# Model output -> the server's histogram of it (server/metrics/server_metrics.cc).
METRICS = {"gate_mean": "gatescope_gate_mean",
           "vigilance_mean": "gatescope_vigilance_crossing"}
HEADING = "## Monitoring reference"
BLOCK = re.compile(r"```json monitoring-reference\n(.*?)\n```", re.S)


def statistics(model_path, images: np.ndarray, batch: int = 250) -> Dict[str, np.ndarray]:
    """Per-example statistics [N, layers] of each statistics output of the archive at
    `model_path`, for uint8 images [N, H, W] normalised as the server does (metadata's
    scale, mean and std)."""
    meta = read_metadata(model_path)
    outputs = [o for o in meta["outputs"] if o in METRICS]
    spec = meta["input"]
    model = torch.jit.load(str(model_path), map_location="cpu")
    mean = torch.tensor(spec["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(spec["std"]).view(1, -1, 1, 1)
    found: Dict[str, List[torch.Tensor]] = {o: [] for o in outputs}
    with torch.no_grad():
        for i in range(0, len(images), batch):
            x = torch.from_numpy(np.array(images[i:i + batch])).float().unsqueeze(1) * spec["scale"]
            result = model((x - mean) / std)
            for o in outputs:
                found[o].append(result[o].double())
    return {o: torch.cat(v).numpy() for o, v in found.items()}


def section(per_example: Dict[str, np.ndarray], source: str) -> str:
    """The card's monitoring section for `per_example` ({output: [N, layers]})."""
    lines = [HEADING, "",
             f"Per layer, over {source}, each statistic as the server computes it for one "
             "served example (`docs/metrics.md`). The drift alerts in `deploy/monitoring/` "
             "compare the served per-layer mean with these means; the per-example spread "
             "tells how many requests a shift needs before it stands out of the noise. "
             "Written by `models/monitoring_reference.py`.", ""]
    records = []
    for output, values in per_example.items():
        metric = METRICS[output]
        mean, std = values.mean(axis=0), values.std(axis=0)
        lines += [f"`{metric}` (model output `{output}`):", "",
                  "| layer | mean | std per example |", "| --- | --- | --- |"]
        lines += [f"| {l} | {m:.4f} | {s:.4f} |" for l, (m, s) in enumerate(zip(mean, std))]
        lines.append("")
        records.append({"metric": metric, "output": output, "examples": int(len(values)),
                        "mean": [round(float(m), 5) for m in mean],
                        "std": [round(float(s), 5) for s in std]})
    lines += ["```json monitoring-reference", "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]", "```", ""]
    return "\n".join(lines)


def update_card(card: pathlib.Path, text: str) -> None:
    """Replaces the card's monitoring section (to the next '## ' heading) or appends it."""
    old = card.read_text()
    start = old.find(HEADING)
    if start < 0:
        card.write_text(old.rstrip("\n") + "\n\n" + text)
        return
    end = old.find("\n## ", start + len(HEADING))
    tail = "" if end < 0 else old[end + 1:]
    card.write_text(old[:start] + text + ("\n" + tail if tail else ""))


def read_reference(card: pathlib.Path) -> List[dict]:
    """The records of a card's monitoring block; [] when the card has none."""
    match = BLOCK.search(card.read_text())
    return json.loads(match.group(1)) if match else []
