"""The TorchScript face of a segmentation network, i.e. the gatescope segmentation model
contract the server calls:

  forward(x [B, C, H, W] preprocessed) -> {"logits": [B, n_classes, H, W]} and, with the
      GDLA decoder, "gdla_gate_mean" [B, 3]: per decoder stage (coarse to fine), the mean
      gate value (served per stage as gatescope_gdla_gate_mean)
  explain_begin(x, query [qy, qx] in [0, 1) of the image) -> state (opaque to the server)
  explain_layer(state, s) -> (state, {"gate": [B, h_s, w_s], "attention": [B, h_s, w_s]})
      for decoder stages s = 0..2 (coarse to fine), one at a time
  explain_end(state) -> {"logits": ...}

Preprocessing (resize to H x W, per-image min-max) and the mapping of logits back to the
input's size are the server's, described in gatescope.json (gatescope.segmentation has
the Python equivalent)."""
from typing import Dict, List, Tuple

import torch
from torch import nn

from gatescope.networks.pvt_seg import PvtSegmenter

State = Tuple[torch.Tensor, List[torch.Tensor], torch.Tensor, float, float]


class ServedSegmenter(nn.Module):
    gdla: torch.jit.Final[bool]  # a constant: TorchScript compiles only the live branch

    def __init__(self, net: PvtSegmenter):
        super().__init__()
        self.net = net
        self.gdla = net.cfg.decoder == "gdla"

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        if self.gdla:
            logits, gates = self.net.forward_with_gates(x)
            return {"logits": logits, "gdla_gate_mean": gates}
        return {"logits": self.net(x)}

    @torch.jit.export
    def explain_begin(self, x: torch.Tensor, query: List[float]) -> State:
        if len(query) != 2:
            raise ValueError("query must be [y, x] in [0, 1)")
        skip, feats = self.net._encode(x)
        return skip, feats, feats[3], query[0], query[1]

    @torch.jit.export
    def explain_layer(self, state: State, layer: int) -> Tuple[State, Dict[str, torch.Tensor]]:
        skip, feats, d, qy, qx = state
        d, maps = self.net.explain_stage(layer, d, feats, qy, qx)
        return (skip, feats, d, qy, qx), maps

    @torch.jit.export
    def explain_end(self, state: State) -> Dict[str, torch.Tensor]:
        return {"logits": self.net._head(state[2], state[0])}
