"""The TorchScript face of a detector, i.e. the gatescope detection model contract the
server calls (task object_detection):

  forward(x [B, C, H, W] preprocessed, any H, W) -> {"logits": [B, Q, classes],
      "boxes": [B, Q, 4] normalised (cx, cy, w, h) of the image}
  explain_begin(x) -> state (opaque to the server)
  explain_layer(state, l) -> (state, maps) for l = 0 .. encoder_layers + decoder_layers - 1:
      encoder layer (PLuG only): "plug_gate_level<k>" [B, M, L, h_k, w_k], the gate of every
          token of level k over the image for each head and sampled level
      decoder layer: "sampling_locations" [B, Q, M, L, P, 2] (normalised (x, y) of the
          image: pixels are x * W, y * H), "attention_weights" [B, Q, M, L, P], and with
          PLuG "plug_gate" [B, Q, M, L]. The network samples level l at (x_l, y_l)
          normalised over its feature map, whose w_l x h_l cells of stride s_l cover
          w_l s_l x h_l s_l pixels of the (padded) canvas from its top left; the image
          coordinates are x = x_l w_l s_l / W, y = y_l h_l s_l / H.
  explain_end(state) -> forward()'s outputs plus "reference_points" [B, Q, 2] (normalised)

Inputs smaller than the training canvas (min_canvas per side) are padded to it inside the
graph, with a padding mask, because the network was trained on padded canvases: its
GroupNorm statistics include the padding, so an unpadded small image is out of
distribution. Larger sides are kept. Score threshold, top-k and the mapping of boxes to
pixels are the server's (gatescope.detection.detect is the Python equivalent)."""
from typing import Dict, List, Tuple

import torch
from torch import nn

from gatescope.networks.deformable_detr import DeformableDETR, ExplainState

# The network's state and, per level, the factors [L, 2] from the level's normalised
# coordinates to the image's.
State = Tuple[ExplainState, torch.Tensor]


class ServedDetector(nn.Module):
    enc_layers: torch.jit.Final[int]
    min_canvas: torch.jit.Final[int]

    def __init__(self, net: DeformableDETR, min_canvas: int = 128):
        super().__init__()
        self.net = net
        self.enc_layers = net.enc_layers
        self.min_canvas = min_canvas

    def _pad(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        b, c, h, w = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
        hc, wc = max(h, self.min_canvas), max(w, self.min_canvas)
        if hc == h and wc == w:
            return x, torch.zeros(b, h, w, dtype=torch.bool, device=x.device)
        padded = x.new_zeros(b, c, hc, wc)
        padded[:, :, :h, :w] = x
        mask = torch.ones(b, hc, wc, dtype=torch.bool, device=x.device)
        mask[:, :h, :w] = False
        return padded, mask

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        padded, mask = self._pad(x)
        return self.net(padded, mask)

    @torch.jit.export
    def explain_begin(self, x: torch.Tensor) -> State:
        padded, mask = self._pad(x)
        state = self.net.explain_begin(padded, mask)
        shapes = state[3].to(x.dtype)  # [L, 2] (h, w)
        strides = torch.tensor(self.net.level_strides, dtype=x.dtype, device=x.device)
        scale = torch.stack([shapes[:, 1] * strides / x.shape[3],
                             shapes[:, 0] * strides / x.shape[2]], -1)
        return state, scale

    @torch.jit.export
    def explain_layer(self, state: State, layer: int) -> Tuple[State, Dict[str, torch.Tensor]]:
        net_state, scale = state
        net_state, maps = self.net.explain_step(net_state, layer)
        if layer >= self.enc_layers:
            maps["sampling_locations"] = maps["sampling_locations"] \
                * scale.view(1, 1, 1, -1, 1, 2)
            return (net_state, scale), maps
        per_level: Dict[str, torch.Tensor] = {}
        if "plug_gate" in maps:
            gate = maps["plug_gate"]  # [B, S, M, L] over the padded canvas
            b, heads, levels = gate.shape[0], gate.shape[2], gate.shape[3]
            shapes: List[List[int]] = net_state[3].tolist()
            padding = net_state[2]  # [B, S], True on padding
            start = 0
            for k, hw in enumerate(shapes):
                n = hw[0] * hw[1]
                pad_k = padding[0, start:start + n].reshape(hw[0], hw[1])
                valid_h = int((~pad_k[:, 0]).sum().clamp(min=1))
                valid_w = int((~pad_k[0, :]).sum().clamp(min=1))
                g = gate[:, start:start + n].reshape(b, hw[0], hw[1], heads, levels)
                per_level["plug_gate_level" + str(k)] = \
                    g[:, :valid_h, :valid_w].permute(0, 3, 4, 1, 2).contiguous()
                start += n
        return (net_state, scale), per_level

    @torch.jit.export
    def explain_end(self, state: State) -> Dict[str, torch.Tensor]:
        out = self.net.explain_end(state[0])
        out.pop("spatial_shapes")
        return out
