"""A small Deformable DETR (single-stage, no box refinement, no two-stage) for grayscale
detection scenes, optionally with the PLuG gate (`plug=True`) in the encoder self-attention
and the decoder cross-attention (the MSDeformAttn modules), as in the PLuG paper.

Everything except the backbone follows the public Deformable-DETR state_dict layout
(models/deformable_detr.py, models/deformable_transformer.py):
    transformer.level_embed                               [n_levels, d_model]
    transformer.encoder.layers.{i}.self_attn.*            MSDeformAttn
    transformer.encoder.layers.{i}.{norm1, linear1, linear2, norm2}
    transformer.decoder.layers.{i}.cross_attn.*           MSDeformAttn
    transformer.decoder.layers.{i}.self_attn.*            nn.MultiheadAttention
    transformer.decoder.layers.{i}.{norm1, norm2, norm3, linear1, linear2}
    transformer.reference_points                          Linear(d_model, 2)
    query_embed                                           Embedding(num_queries, 2 * d_model)
    input_proj.{l}.0 / .1                                 Conv2d / GroupNorm
    class_embed                                           Linear(d_model, num_classes)
    bbox_embed.layers.{0,1,2}                             MLP d_model -> d_model -> d_model -> 4
The heads are single (one class_embed / bbox_embed shared by nothing else; no aux loss).
The backbone (`backbone.*`) is a tiny conv net of our own: 5 stride-2 stages
(conv3x3 + GroupNorm + ReLU, then conv3x3 + GroupNorm + ReLU), the outputs of the last three
(strides 8, 16, 32) are the first three levels; the fourth level (stride 64) is, as in the
public code, input_proj.3 = Conv2d(3x3, stride 2, padding 1) + GroupNorm on the stride-32
backbone output. input_proj uses GroupNorm(min(32, d_model), d_model): the public 32 groups
whenever d_model >= 32 (d_model 64 -> 2 channels per group).

Conventions as the public code: sine position encoding (normalize=True, scale 2*pi,
(cumsum - 0.5) / (last + 1e-6)), level embedding added to the position encoding, valid
ratios from the padding mask (encoder reference points at pixel centres of the valid part;
decoder reference points sigmoid(reference_points(query_pos)) are in the valid part and are
multiplied by the valid ratios, so every sampling location is normalised to the PADDED
canvas), post-norm layers, ReLU FFN, boxes = sigmoid(bbox_embed(hs) + [inverse_sigmoid(ref),
0, 0]), normalised (cx, cy, w, h) relative to the VALID image (as DETR targets).
One deviation: valid row/column counts are clamped to >= 1 (the public code would divide by
zero for an image whose valid part vanishes at a coarse level).

Input: x [B, 1, H, W] float (already normalised), optional mask bool [B, H, W] (True on
padding; None = no padding). Nothing depends on H, W at build time; the model scripts with
torch.jit.script. Output {"logits": [B, Q, num_classes], "boxes": [B, Q, 4]}.
"""
import math
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from gatescope.attention.fused import set_fused
from gatescope.attention.ms_deform_attn import MSDeformAttn

# (src, pos, mask_flat, spatial_shapes, level_start_index, encoder reference points,
#  decoder target, query_pos, reference points, decoder reference points)
ExplainState = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                     torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x = x.clamp(min=0.0, max=1.0)
    return torch.log(x.clamp(min=eps) / (1.0 - x).clamp(min=eps))


def box_cxcywh_to_xyxy(b: torch.Tensor) -> torch.Tensor:
    cx, cy, w, h = b.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)


def _interp_mask(mask: torch.Tensor, size: List[int]) -> torch.Tensor:
    return F.interpolate(mask[None].float(), size=size).to(torch.bool)[0]


class PositionEmbeddingSine(nn.Module):
    """The public sine encoding (normalize=True): [B, 2 * num_pos_feats, H, W], no params."""

    def __init__(self, num_pos_feats: int = 64, temperature: float = 10000.0):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.scale = 2.0 * math.pi
        self.eps = 1e-6

    def forward(self, mask: torch.Tensor) -> torch.Tensor:
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        y_embed = (y_embed - 0.5) / (y_embed[:, -1:, :] + self.eps) * self.scale
        x_embed = (x_embed - 0.5) / (x_embed[:, :, -1:] + self.eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=mask.device)
        dim_t = self.temperature ** (2.0 * torch.div(dim_t, 2, rounding_mode="floor")
                                     / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()),
                            dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()),
                            dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


def _conv_gn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                         nn.GroupNorm(min(8, cout), cout), nn.ReLU(inplace=True))


class TinyBackbone(nn.Module):
    """5 stride-2 stages; returns the stride-8, -16 and -32 feature maps."""

    def __init__(self, in_channels: int = 1, widths: Tuple[int, ...] = (16, 32, 48, 64, 96)):
        super().__init__()
        stages = []
        cin = in_channels
        for w in widths:
            stages.append(nn.Sequential(_conv_gn(cin, w, 2), _conv_gn(w, w, 1)))
            cin = w
        self.stages = nn.ModuleList(stages)
        self.num_channels = list(widths[2:])

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        outs: List[torch.Tensor] = []
        for i, stage in enumerate(self.stages):
            x = stage(x)
            if i >= 2:
                outs.append(x)
        return outs


class DeformableTransformerEncoderLayer(nn.Module):
    def __init__(self, d_model: int, d_ffn: int, dropout: float, n_levels: int, n_heads: int,
                 n_points: int, plug: bool):
        super().__init__()
        self.self_attn = MSDeformAttn(d_model, n_levels, n_heads, n_points, plug=plug)
        self.dropout1 = nn.Dropout(dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.linear1 = nn.Linear(d_model, d_ffn)
        self.dropout2 = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ffn, d_model)
        self.dropout3 = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(d_model)

    def _ffn(self, src: torch.Tensor) -> torch.Tensor:
        src2 = self.linear2(self.dropout2(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout3(src2))

    def forward(self, src: torch.Tensor, pos: torch.Tensor, reference_points: torch.Tensor,
                spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
                padding_mask: torch.Tensor) -> torch.Tensor:
        return self.forward_with_maps(src, pos, reference_points, spatial_shapes,
                                      level_start_index, padding_mask)[0]

    def forward_with_maps(self, src: torch.Tensor, pos: torch.Tensor,
                          reference_points: torch.Tensor, spatial_shapes: torch.Tensor,
                          level_start_index: torch.Tensor, padding_mask: torch.Tensor
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        src2, maps = self.self_attn.forward_with_maps(src + pos, reference_points, src,
                                                      spatial_shapes, level_start_index,
                                                      padding_mask)
        src = self.norm1(src + self.dropout1(src2))
        return self._ffn(src), maps


class DeformableTransformerDecoderLayer(nn.Module):
    def __init__(self, d_model: int, d_ffn: int, dropout: float, n_levels: int, n_heads: int,
                 n_points: int, plug: bool):
        super().__init__()
        self.cross_attn = MSDeformAttn(d_model, n_levels, n_heads, n_points, plug=plug)
        self.dropout1 = nn.Dropout(dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.self_attn = nn.MultiheadAttention(d_model, n_heads, dropout=dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm2 = nn.LayerNorm(d_model)
        self.linear1 = nn.Linear(d_model, d_ffn)
        self.dropout3 = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ffn, d_model)
        self.dropout4 = nn.Dropout(dropout)
        self.norm3 = nn.LayerNorm(d_model)

    def _self(self, tgt: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        q = (tgt + query_pos).transpose(0, 1)
        tgt2 = self.self_attn(q, q, tgt.transpose(0, 1))[0].transpose(0, 1)
        return self.norm2(tgt + self.dropout2(tgt2))

    def _ffn(self, tgt: torch.Tensor) -> torch.Tensor:
        tgt2 = self.linear2(self.dropout3(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout4(tgt2))

    def forward(self, tgt: torch.Tensor, query_pos: torch.Tensor,
                reference_points: torch.Tensor, src: torch.Tensor,
                spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
                padding_mask: torch.Tensor) -> torch.Tensor:
        return self.forward_with_maps(tgt, query_pos, reference_points, src, spatial_shapes,
                                      level_start_index, padding_mask)[0]

    def forward_with_maps(self, tgt: torch.Tensor, query_pos: torch.Tensor,
                          reference_points: torch.Tensor, src: torch.Tensor,
                          spatial_shapes: torch.Tensor, level_start_index: torch.Tensor,
                          padding_mask: torch.Tensor
                          ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        tgt = self._self(tgt, query_pos)
        tgt2, maps = self.cross_attn.forward_with_maps(tgt + query_pos, reference_points, src,
                                                       spatial_shapes, level_start_index,
                                                       padding_mask)
        tgt = self.norm1(tgt + self.dropout1(tgt2))
        return self._ffn(tgt), maps


class DeformableTransformerEncoder(nn.Module):
    def __init__(self, layers: List[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class DeformableTransformerDecoder(nn.Module):
    def __init__(self, layers: List[nn.Module]):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class DeformableTransformer(nn.Module):
    """Holds the public transformer.* parameters; the forward logic lives in DeformableDETR."""

    def __init__(self, d_model: int, n_heads: int, enc_layers: int, dec_layers: int,
                 d_ffn: int, dropout: float, n_levels: int, n_points: int, plug: bool):
        super().__init__()
        self.d_model = d_model
        self.encoder = DeformableTransformerEncoder(
            [DeformableTransformerEncoderLayer(d_model, d_ffn, dropout, n_levels, n_heads,
                                               n_points, plug) for _ in range(enc_layers)])
        self.decoder = DeformableTransformerDecoder(
            [DeformableTransformerDecoderLayer(d_model, d_ffn, dropout, n_levels, n_heads,
                                               n_points, plug) for _ in range(dec_layers)])
        self.level_embed = nn.Parameter(torch.zeros(n_levels, d_model))
        self.reference_points = nn.Linear(d_model, 2)
        self._reset_parameters()

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for m in self.modules():
            if isinstance(m, MSDeformAttn):
                m._reset_parameters()
        nn.init.xavier_uniform_(self.reference_points.weight, gain=1.0)
        nn.init.constant_(self.reference_points.bias, 0.0)
        nn.init.normal_(self.level_embed)


class MLP(nn.Module):
    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, num_layers: int):
        super().__init__()
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in
                                    zip([input_dim] + h, h + [output_dim]))
        self.num_layers = num_layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < self.num_layers - 1:
                x = F.relu(x)
        return x


class DeformableDETR(nn.Module):
    def __init__(self, num_classes: int = 20, d_model: int = 64, n_heads: int = 8,
                 n_points: int = 4, enc_layers: int = 2, dec_layers: int = 2,
                 d_ffn: int = 256, num_queries: int = 50, dropout: float = 0.1,
                 plug: bool = False, in_channels: int = 1,
                 backbone_widths: Tuple[int, ...] = (16, 32, 48, 64, 96)):
        super().__init__()
        n_levels = 4
        self.num_classes = num_classes
        self.num_queries = num_queries
        self.d_model = d_model
        self.n_levels = n_levels
        self.plug = plug
        self.enc_layers = enc_layers
        self.dec_layers = dec_layers
        self.backbone = TinyBackbone(in_channels, backbone_widths)
        # Input pixels per feature cell of each level: the backbone's last three stages,
        # then input_proj.3's stride 2.
        n_stages = len(backbone_widths)
        self.level_strides: List[int] = [2 ** (i + 1) for i in range(n_stages - 3, n_stages)] \
            + [2 ** (n_stages + 1)]
        self.position_embedding = PositionEmbeddingSine(d_model // 2)
        self.transformer = DeformableTransformer(d_model, n_heads, enc_layers, dec_layers,
                                                 d_ffn, dropout, n_levels, n_points, plug)
        self.class_embed = nn.Linear(d_model, num_classes)
        self.bbox_embed = MLP(d_model, d_model, 4, 3)
        self.query_embed = nn.Embedding(num_queries, 2 * d_model)
        groups = min(32, d_model)
        chans = self.backbone.num_channels
        projs = [nn.Sequential(nn.Conv2d(c, d_model, kernel_size=1),
                               nn.GroupNorm(groups, d_model)) for c in chans]
        projs.append(nn.Sequential(nn.Conv2d(chans[-1], d_model, kernel_size=3, stride=2,
                                             padding=1),
                                   nn.GroupNorm(groups, d_model)))
        self.input_proj = nn.ModuleList(projs)
        prior_prob = 0.01
        bias_value = -math.log((1 - prior_prob) / prior_prob)
        nn.init.constant_(self.class_embed.bias, bias_value)
        nn.init.constant_(self.bbox_embed.layers[-1].weight, 0.0)
        nn.init.constant_(self.bbox_embed.layers[-1].bias, 0.0)
        with torch.no_grad():
            self.bbox_embed.layers[-1].bias[2:] = -2.0
        for proj in self.input_proj:
            nn.init.xavier_uniform_(proj[0].weight, gain=1.0)
            nn.init.constant_(proj[0].bias, 0.0)

    def set_fused(self, enabled: bool):
        """use_fused on every MSDeformAttn (set before torch.jit.script: it is Final)."""
        set_fused(self, enabled)

    # ---------------------------------------------------------------- pieces
    def _prepare(self, x: torch.Tensor, mask: Optional[torch.Tensor]
                 ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                            torch.Tensor, torch.Tensor]:
        """(src [B,S,C], lvl_pos [B,S,C], mask_flatten [B,S], spatial_shapes [L,2],
        level_start_index [L], valid_ratios [B,L,2])."""
        b = x.shape[0]
        if mask is None:
            mask = torch.zeros(b, x.shape[2], x.shape[3], dtype=torch.bool, device=x.device)
        feats = self.backbone(x)
        srcs: List[torch.Tensor] = []
        masks: List[torch.Tensor] = []
        for lvl, proj in enumerate(self.input_proj):
            if lvl < len(feats):
                src = proj(feats[lvl])
            else:
                src = proj(feats[-1])
            srcs.append(src)
            masks.append(_interp_mask(mask, [src.shape[2], src.shape[3]]))
        src_list: List[torch.Tensor] = []
        pos_list: List[torch.Tensor] = []
        mask_list: List[torch.Tensor] = []
        shapes: List[List[int]] = []
        ratios: List[torch.Tensor] = []
        for lvl in range(len(srcs)):
            src, m = srcs[lvl], masks[lvl]
            h, w = src.shape[2], src.shape[3]
            shapes.append([h, w])
            pos = self.position_embedding(m).to(src.dtype)
            src_list.append(src.flatten(2).transpose(1, 2))
            pos_list.append(pos.flatten(2).transpose(1, 2)
                            + self.transformer.level_embed[lvl].view(1, 1, -1))
            mask_list.append(m.flatten(1))
            valid_h = (~m[:, :, 0]).sum(1).clamp(min=1).to(src.dtype)
            valid_w = (~m[:, 0, :]).sum(1).clamp(min=1).to(src.dtype)
            ratios.append(torch.stack([valid_w / w, valid_h / h], -1))
        spatial_shapes = torch.tensor(shapes, dtype=torch.long, device=x.device)
        sizes = spatial_shapes[:, 0] * spatial_shapes[:, 1]
        start = sizes.cumsum(0) - sizes
        return (torch.cat(src_list, 1), torch.cat(pos_list, 1), torch.cat(mask_list, 1),
                spatial_shapes, start, torch.stack(ratios, 1))

    def _encoder_reference_points(self, spatial_shapes: torch.Tensor,
                                  valid_ratios: torch.Tensor) -> torch.Tensor:
        shapes: List[List[int]] = spatial_shapes.tolist()
        refs: List[torch.Tensor] = []
        dtype, device = valid_ratios.dtype, valid_ratios.device
        for lvl, hw in enumerate(shapes):
            h, w = hw[0], hw[1]
            ys = torch.linspace(0.5, h - 0.5, h, dtype=dtype, device=device)
            xs = torch.linspace(0.5, w - 0.5, w, dtype=dtype, device=device)
            ref_y = ys[:, None].expand(h, w).reshape(-1)[None] / (valid_ratios[:, lvl, 1:2] * h)
            ref_x = xs[None, :].expand(h, w).reshape(-1)[None] / (valid_ratios[:, lvl, 0:1] * w)
            refs.append(torch.stack((ref_x, ref_y), -1))
        reference_points = torch.cat(refs, 1)
        return reference_points[:, :, None] * valid_ratios[:, None]

    def _queries(self, b: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        query_pos, tgt = torch.split(self.query_embed.weight, self.d_model, dim=1)
        query_pos = query_pos[None].expand(b, -1, -1)
        tgt = tgt[None].expand(b, -1, -1)
        reference = self.transformer.reference_points(query_pos).sigmoid()
        return query_pos, tgt, reference

    def _heads(self, hs: torch.Tensor, reference: torch.Tensor) -> Dict[str, torch.Tensor]:
        tmp = self.bbox_embed(hs)
        offset = torch.cat([inverse_sigmoid(reference), torch.zeros_like(reference)], -1)
        return {"logits": self.class_embed(hs), "boxes": (tmp + offset).sigmoid()}

    # ---------------------------------------------------------------- API
    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
                ) -> Dict[str, torch.Tensor]:
        """{"logits" [B, Q, C], "boxes" [B, Q, 4]} and, with plug, "plug_scale_mean"
        [B, enc_layers + dec_layers]: per layer (encoder layers first), the mean logit scale
        1 + G over heads, levels and queries (an encoder layer's queries are the image's
        tokens: padding left out). G is a by-product of the layer's attention logits, so this
        costs one reduction per layer."""
        src, pos, mask_flat, shapes, start, ratios = self._prepare(x, mask)
        ref_enc = self._encoder_reference_points(shapes, ratios)
        scales: List[torch.Tensor] = []
        valid = (~mask_flat).to(src.dtype)  # [B, S]
        for layer in self.transformer.encoder.layers:
            src, maps = layer.forward_with_maps(src, pos, ref_enc, shapes, start, mask_flat)
            if "plug_gate" in maps:
                per_token = maps["plug_gate"].mean(dim=(2, 3))  # [B, S]
                scales.append(1.0 + (per_token * valid).sum(1) / valid.sum(1).clamp(min=1.0))
        query_pos, tgt, reference = self._queries(x.shape[0])
        ref_dec = reference[:, :, None] * ratios[:, None]
        for layer in self.transformer.decoder.layers:
            tgt, maps = layer.forward_with_maps(tgt, query_pos, ref_dec, src, shapes, start,
                                                mask_flat)
            if "plug_gate" in maps:
                scales.append(1.0 + maps["plug_gate"].mean(dim=(1, 2, 3)))
        out = self._heads(tgt, reference)
        if len(scales) > 0:
            out["plug_scale_mean"] = torch.stack(scales, dim=1)
        return out

    def explain_begin(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
                      ) -> ExplainState:
        """Starts a layer-by-layer pass: backbone, projections and decoder queries. The state
        is opaque; run explain_step for layers 0 .. num_layers - 1 in order, then
        explain_end."""
        src, pos, mask_flat, shapes, start, ratios = self._prepare(x, mask)
        ref_enc = self._encoder_reference_points(shapes, ratios)
        query_pos, tgt, reference = self._queries(x.shape[0])
        ref_dec = reference[:, :, None] * ratios[:, None]
        return (src, pos, mask_flat, shapes, start, ref_enc, tgt, query_pos, reference,
                ref_dec)

    def explain_step(self, state: ExplainState, layer: int
                     ) -> Tuple[ExplainState, Dict[str, torch.Tensor]]:
        """Runs layer `layer` (encoder layers first, then decoder layers) and returns its
        maps. Encoder layer (plug only): plug_gate [B, S, M, L] (S runs over the flattened
        levels). Decoder layer: sampling_locations [B, Q, M, L, P, 2] (normalised (x, y) on
        the padded canvas), attention_weights [B, Q, M, L, P] (after the softmax), and with
        plug, plug_gate [B, Q, M, L]."""
        src, pos, mask_flat, shapes, start, ref_enc, tgt, query_pos, reference, ref_dec = state
        maps: Dict[str, torch.Tensor] = {}
        if layer < self.enc_layers:
            for i, enc in enumerate(self.transformer.encoder.layers):
                if i == layer:
                    src, enc_maps = enc.forward_with_maps(src, pos, ref_enc, shapes, start,
                                                          mask_flat)
                    if "plug_gate" in enc_maps:
                        maps["plug_gate"] = enc_maps["plug_gate"]
        else:
            for i, dec in enumerate(self.transformer.decoder.layers):
                if i == layer - self.enc_layers:
                    tgt, maps = dec.forward_with_maps(tgt, query_pos, ref_dec, src, shapes,
                                                      start, mask_flat)
        return (src, pos, mask_flat, shapes, start, ref_enc, tgt, query_pos, reference,
                ref_dec), maps

    def explain_end(self, state: ExplainState) -> Dict[str, torch.Tensor]:
        """The outputs of forward plus spatial_shapes [L, 2] and reference_points [B, Q, 2]
        (normalised (x, y) in the valid image)."""
        out = self._heads(state[6], state[8])
        out["spatial_shapes"] = state[3]
        out["reference_points"] = state[8]
        return out

    @torch.jit.export
    def explain(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
                ) -> Dict[str, List[torch.Tensor]]:
        """The whole staged pass at once; maps one list entry per layer:
        decoder_sampling_locations, decoder_attention_weights, decoder_plug_gate (plug only),
        encoder_plug_gate (plug only) as explain_step describes; plus logits [[B, Q, C]],
        boxes [[B, Q, 4]], spatial_shapes [[L, 2]], level_start_index [[L]],
        reference_points [[B, Q, 2]] (in the valid image)."""
        state = self.explain_begin(x, mask)
        out: Dict[str, List[torch.Tensor]] = {}
        n_layers = self.enc_layers + self.dec_layers
        for layer in range(n_layers):
            state, maps = self.explain_step(state, layer)
            prefix = "encoder_" if layer < self.enc_layers else "decoder_"
            for k, v in maps.items():
                key = prefix + k
                if key not in out:
                    out[key] = []
                out[key].append(v)
        for k, v in self.explain_end(state).items():
            out[k] = [v]
        out["level_start_index"] = [state[4]]
        return out
