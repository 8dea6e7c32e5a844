"""PVT-GDLA and the PVT-LinearAttn baseline: a PVT-v2 encoder, three decoder stages
(ConvTranspose x2 upsampling, additive encoder skip, one GDLA or linear-attention block),
x4 bilinear upsampling, a full-resolution ResBlk skip and 1x1 heads. Parameter names and
shapes are those of the public PVT-GDLA code (`backbone.*`, `up1..3`, `de1..3`, `resblk`,
`head1` and, with deep supervision, `head2..4`), so its `model_state_dict` loads as is.

Inputs must have H and W divisible by 32. The backbone sees the input repeated to three
channels when it has one, as in the public code.
"""
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from gatescope.attention.fused import set_fused
from gatescope.networks.gdla_mixer import GDLAM
from gatescope.networks.linear_attn_block import MHLA
from gatescope.networks.pvt_v2 import VARIANTS, PvtV2Encoder
from gatescope.networks.seg_blocks import ResBlk, Upsample

DECODERS = ("gdla", "la")


@dataclass
class SegConfig:
    decoder: str = "gdla"            # gdla (PVT-GDLA) | la (PVT-LinearAttn)
    variant: str = "b2"              # PVT-v2 encoder size: b0 | b1 | b2
    in_chs: int = 1
    n_classes: int = 9
    n_heads: List[int] = field(default_factory=lambda: [2, 4, 10, 16])
    gate: str = "sigmoid"            # public code: sigmoid; paper: silu
    qkv_bias: bool = True
    norm_eps: float = 1e-5
    hidden_ratio: float = 4.0
    us_ks: int = 3
    deep_supervision: bool = True    # public configs train with it: head2..4 exist
    drop_path_rate: float = 0.1
    use_fused: bool = False          # fused gdla_attention when gradients are off

    def to_dict(self) -> Dict:
        return asdict(self)


class PvtSegmenter(nn.Module):
    def __init__(self, cfg: SegConfig):
        super().__init__()
        if cfg.decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}")
        chs = VARIANTS[cfg.variant].embed_dims
        self.cfg = cfg
        self.deep_supervision = cfg.deep_supervision
        self.backbone = PvtV2Encoder(cfg.variant, 3, cfg.drop_path_rate)
        self.up1 = Upsample(chs[3], chs[2], cfg.us_ks)
        self.de1 = self._block(cfg, chs[2], cfg.n_heads[2])
        self.up2 = Upsample(chs[2], chs[1], cfg.us_ks)
        self.de2 = self._block(cfg, chs[1], cfg.n_heads[1])
        self.up3 = Upsample(chs[1], chs[0], cfg.us_ks)
        self.de3 = self._block(cfg, chs[0], cfg.n_heads[0])
        self.resblk = ResBlk(cfg.in_chs, chs[0])
        self.head1 = nn.Conv2d(chs[0], cfg.n_classes, 1)
        if cfg.deep_supervision:
            self.head2 = nn.Conv2d(chs[1], cfg.n_classes, 1)
            self.head3 = nn.Conv2d(chs[2], cfg.n_classes, 1)
            self.head4 = nn.Conv2d(chs[3], cfg.n_classes, 1)

    @staticmethod
    def _block(cfg: SegConfig, dim: int, heads: int) -> nn.Module:
        if cfg.decoder == "gdla":
            return GDLAM(dim, heads, cfg.qkv_bias, cfg.norm_eps, cfg.hidden_ratio, cfg.gate,
                         cfg.use_fused)
        return MHLA(dim, heads, cfg.qkv_bias, cfg.norm_eps, cfg.hidden_ratio)

    def set_fused(self, enabled: bool):
        """use_fused on every GDLA decoder attention (gatescope.attention.fused); the
        linear-attention baseline has no fused kernel."""
        set_fused(self, enabled)

    def _encode(self, x: torch.Tensor) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        if x.shape[2] % 32 != 0 or x.shape[3] % 32 != 0:
            raise ValueError("input height and width must be multiples of 32")
        skip = self.resblk(x)
        rgb = x if x.shape[1] == 3 else x.repeat(1, 3, 1, 1)
        return skip, self.backbone(rgb)

    def _head(self, d1: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        d1 = F.interpolate(d1, scale_factor=4.0, mode="bilinear", align_corners=False)
        return self.head1(d1 + skip)

    def _stage_input(self, stage: int, d: torch.Tensor, feats: List[torch.Tensor]) -> torch.Tensor:
        """Input of decoder stage 0..2 (de1..de3): upsampled previous output plus skip."""
        if stage == 0:
            return self.up1(d) + feats[2]
        if stage == 1:
            return self.up2(d) + feats[1]
        return self.up3(d) + feats[0]

    def _decode(self, feats: List[torch.Tensor]) -> List[torch.Tensor]:
        d3 = self.de1(self._stage_input(0, feats[3], feats))
        d2 = self.de2(self._stage_input(1, d3, feats))
        d1 = self.de3(self._stage_input(2, d2, feats))
        return [d3, d2, d1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits [B, n_classes, H, W]."""
        skip, feats = self._encode(x)
        return self._head(self._decode(feats)[2], skip)

    def forward_with_gates(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """GDLA decoder only: forward()'s logits plus the gate mean of each decoder stage
        [B, 3] (coarse to fine, as explain_stage numbers them; GDLAM.forward_with_gate)."""
        skip, feats = self._encode(x)
        d3, g1 = self.de1.forward_with_gate(self._stage_input(0, feats[3], feats))
        d2, g2 = self.de2.forward_with_gate(self._stage_input(1, d3, feats))
        d1, g3 = self.de3.forward_with_gate(self._stage_input(2, d2, feats))
        return self._head(d1, skip), torch.stack([g1, g2, g3], dim=1)

    @torch.jit.unused
    def forward_all(self, x: torch.Tensor) -> List[torch.Tensor]:
        """[main logits] or, with deep supervision, [stage-4, de1, de2, main] logits, all at
        the input's size (the public code's training outputs)."""
        skip, feats = self._encode(x)
        d3, d2, d1 = self._decode(feats)
        out = self._head(d1, skip)
        if not self.deep_supervision:
            return [out]
        size = (x.shape[2], x.shape[3])
        return [F.interpolate(h(t), size=size, mode="bilinear", align_corners=False)
                for h, t in ((self.head4, feats[3]), (self.head3, d3), (self.head2, d2))] + [out]

    def explain_stage(self, stage: int, d: torch.Tensor, feats: List[torch.Tensor],
                      query_y: float, query_x: float) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Runs decoder stage 0..2 (coarse to fine) from the previous output `d` (stage 0:
        the deepest encoder map) and returns its output and maps [B, h, w]: `gate` (gate
        values) and `attention` (the effective attention of the token under the query point
        (query_y, query_x) in [0, 1) of the image over all tokens)."""
        t = self._stage_input(stage, d, feats)
        b, h, w = t.shape[0], t.shape[2], t.shape[3]
        query = min(int(query_y * h), h - 1) * w + min(int(query_x * w), w - 1)
        if stage == 0:
            out, maps = self.de1.explain(t, query)
        elif stage == 1:
            out, maps = self.de2.explain(t, query)
        else:
            out, maps = self.de3.explain(t, query)
        return out, {k: v.reshape(b, h, w) for k, v in maps.items()}

    def explain(self, x: torch.Tensor, query_y: float,
                query_x: float) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Logits plus every stage's maps, keyed `gate.s` / `attention.s` (s = 1..3)."""
        skip, feats = self._encode(x)
        d = feats[3]
        maps: Dict[str, torch.Tensor] = {}
        for stage in range(3):
            d, stage_maps = self.explain_stage(stage, d, feats, query_y, query_x)
            for k, v in stage_maps.items():
                maps[k + "." + str(stage + 1)] = v
        return self._head(d, skip), maps


def build_segmenter(cfg: SegConfig) -> PvtSegmenter:
    return PvtSegmenter(cfg)
