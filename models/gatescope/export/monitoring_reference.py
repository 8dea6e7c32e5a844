"""Reference values of a model's served per-layer statistics, written into its card.

The server observes, per served example, the model's per-layer statistics outputs in
Prometheus histograms (server/metrics/server_metrics.cc): "gate_mean" (M-DGSA gates) in
`gatescope_gate_mean`, "vigilance_mean" (DAR) in `gatescope_vigilance_crossing`,
"plug_scale_mean" (PLuG: the logit scale 1 + G) in `gatescope_plug_scale_mean` and
"gdla_gate_mean" (GDLA decoder gates, one "layer" per decoder stage) in
`gatescope_gdla_gate_mean`. Drift alerts
compare the served mean of each layer with the mean over the model's held-out data, recorded
here in the model card (README.md) as a table and a machine-readable block. The server reads
that block when it loads the model and exports it beside the histograms
(`gatescope_reference_mean`, `gatescope_reference_stddev`), so the reference travels with
the model.
"""
import json
import pathlib
import re
from typing import Dict, Iterable, Iterator, List, Sequence, Tuple

import numpy as np
import torch

from gatescope.export.archive import read_metadata

# Model output -> the server's histogram of it (server/metrics/server_metrics.cc).
METRICS = {"gate_mean": "gatescope_gate_mean",
           "vigilance_mean": "gatescope_vigilance_crossing",
           "plug_scale_mean": "gatescope_plug_scale_mean",
           "gdla_gate_mean": "gatescope_gdla_gate_mean"}
HEADING = "## Monitoring reference"
BLOCK = re.compile(r"```json monitoring-reference\n(.*?)\n```", re.S)


def statistics_outputs(meta: dict) -> List[str]:
    """The outputs of a model (its metadata) that the server observes as statistics."""
    return [o for o in meta["outputs"] if o in METRICS]


def statistics(model_path, inputs: Iterable) -> Dict[str, np.ndarray]:
    """Per-example statistics [N, layers] of each statistics output of the archive at
    `model_path`, over `inputs`: batches of model inputs preprocessed as the server does
    (classifier_inputs, segmenter_inputs, detector_inputs: tensors; text_inputs: tuples of
    forward arguments), in the order of the examples."""
    outputs = statistics_outputs(read_metadata(model_path))
    model = torch.jit.load(str(model_path), map_location="cpu")
    found: Dict[str, List[torch.Tensor]] = {o: [] for o in outputs}
    with torch.no_grad():
        for x in inputs:
            result = model(*x) if isinstance(x, tuple) else model(x)
            for o in outputs:
                found[o].append(result[o].double())
    return {o: torch.cat(v).numpy() for o, v in found.items()}


def classifier_inputs(meta: dict, images: np.ndarray, batch: int = 250) -> Iterator[torch.Tensor]:
    """uint8 images [N, H, W] scaled and normalised by the metadata's scale, mean and std."""
    spec = meta["input"]
    mean = torch.tensor(spec["mean"]).view(1, -1, 1, 1)
    std = torch.tensor(spec["std"]).view(1, -1, 1, 1)
    for i in range(0, len(images), batch):
        x = torch.from_numpy(np.array(images[i:i + batch])).float().unsqueeze(1) * spec["scale"]
        yield (x - mean) / std


def text_inputs(meta: dict, tokenizer, texts: Sequence[str], batch: int = 64
                ) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """(token_ids, attention_mask) batches of `texts` in order, each text cut into pieces and
    truncated to the model's max_tokens as the server does, padded to its batch's longest
    (the model's statistics skip padding, so each text's equal its own alone)."""
    from gatescope.text_batching import encode_all, pad_batch
    ids, _ = encode_all(tokenizer, texts, meta["text"]["max_tokens"])
    for i in range(0, len(ids), batch):
        yield pad_batch(ids[i:i + batch], meta["text"]["pad_id"])


def segmenter_inputs(meta: dict, images: np.ndarray, batch: int = 8) -> Iterator[torch.Tensor]:
    """uint8 images [N, H, W] resized to the model's input and min-max scaled per image."""
    from gatescope.segmentation import preprocess
    size = tuple(meta["input"]["shape"][1:])
    for i in range(0, len(images), batch):
        yield preprocess(torch.from_numpy(np.array(images[i:i + batch])).unsqueeze(1), size)


def detector_inputs(images: Iterable[np.ndarray]) -> Iterator[torch.Tensor]:
    """Each uint8 image [H, W] alone at its own size, normalised (the model pads it)."""
    from gatescope.detection import preprocess
    for image in images:
        yield preprocess(image)


def section(per_example: Dict[str, np.ndarray], source: str) -> str:
    """The card's monitoring section for `per_example` ({output: [N, layers]})."""
    lines = [HEADING, "",
             f"Per layer, over {source}, each statistic as the server computes it for one "
             "served example (`docs/metrics.md`). The server reads the block below when it "
             "loads the model and exports it beside its histograms "
             "(`gatescope_reference_mean`, `gatescope_reference_stddev`); the drift alerts in "
             "`deploy/monitoring/` compare the served per-layer mean with these means, and the "
             "per-example spread tells how many requests a shift needs before it stands out of "
             "the noise. Written by `models/monitoring_reference.py`.", ""]
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
