"""Text classifiers: DGT (M-DGSA), a vanilla Transformer and a Differential Transformer
sharing one encoder; only the attention differs (the DGSA paper, section 4.3 and Table 2).

Encoder: learned token embedding (padding_idx = pad_id), a learned class token prepended
at position 0, learned positions for max_tokens + 1 tokens, pre-norm blocks (attention,
then a SwiGLU feed-forward; DGT's M-DGSA has no [Q+;Q-] residual, unlike DGViT), a final
LayerNorm and a linear head on the class token.

Model contract (TorchScript; the server's "text_classification" task):
  forward(token_ids int64 [B, T], attention_mask bool [B, T]) -> Dict[str, Tensor]:
      "logits" [B, classes]; DGT also "gate_mean" [B, layers] (per layer the mean gate
      over heads and the visible tokens, class token included). attention_mask is True at
      text pieces and False at padding; padded keys get attention weight 0 and the
      statistics skip padded queries, so a padded batch gives each example's own numbers.
      The class token is always visible. T may be 0..max_tokens.
  explain_begin(token_ids [1, T], attention_mask [1, T] or None) -> tokens [1, T+1, dim]
      (one unpadded example; the server passes forward()'s inputs, whose mask is all True);
  explain_layer(tokens, layer) -> (tokens, maps): "attention" [1, H, T+1, T+1] (DGT: the
      signed map g A+ - (1-g) A-; DiffTransformer: A1 - lambda A2), DGT also "gate"
      [1, H, T+1]; explain_end(tokens) -> {"logits"}; explain(token_ids): every layer.
Fused ops (torch.ops.gatescope) run in forward() after set_fused(True) while gradients
are off; explain always uses the eager maps.
"""
import dataclasses
from typing import Dict, List, Optional, Tuple

import torch
from torch import nn
import torch.nn.functional as F

from gatescope.attention import MultiheadDGSA, MultiheadDiffAttn, MultiheadSelfAttention
from gatescope.attention.fused import set_fused
from gatescope.networks.layerwise import LayerwiseExplain
from gatescope.networks.vit import SwiGLU

TEXT_ARCHS = ("dgt", "transformer", "difftransformer")


@dataclasses.dataclass
class TextConfig:
    arch: str = "dgt"            # "dgt", "transformer" or "difftransformer"
    vocab_size: int = 8000
    max_tokens: int = 64         # text pieces; the class token is extra
    dim: int = 64
    depth: int = 2
    heads: int = 2               # dim % (2 * heads) == 0 (M-DGSA and DiffAttn streams)
    mlp_ratio: float = 4.0       # SwiGLU hidden = dim * mlp_ratio
    dropout: float = 0.1
    num_classes: int = 2
    pad_id: int = 0
    lambda_init: float = 0.8     # M-DGSA's output scale (1 - lambda_init)

    def validate(self):
        if self.arch not in TEXT_ARCHS:
            raise ValueError(f"unknown arch {self.arch!r}; one of {TEXT_ARCHS}")
        if self.dim % (2 * self.heads) != 0:
            raise ValueError("dim must be divisible by 2 * heads")
        if self.max_tokens < 1 or self.vocab_size < 2 or self.num_classes < 2:
            raise ValueError("max_tokens >= 1, vocab_size >= 2 and num_classes >= 2 needed")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError("pad_id must be a token id")


def make_text_attention(cfg: TextConfig, layer_index: int) -> nn.Module:
    if cfg.arch == "dgt":
        return MultiheadDGSA(cfg.dim, cfg.heads, cfg.lambda_init, qk_residual=False)
    if cfg.arch == "transformer":
        return MultiheadSelfAttention(cfg.dim, cfg.heads)
    if cfg.arch == "difftransformer":
        return MultiheadDiffAttn(cfg.dim, cfg.heads, layer_index)
    raise ValueError(f"unknown arch {cfg.arch}")


class TextSwiGLU(SwiGLU):
    """networks.vit.SwiGLU (same parameters: w_in [2 hidden, dim], w_out) computing the two
    halves of w_in as two products instead of one product and a chunk: the same function,
    about twice as fast to train on a CPU (chunk's backward concatenates the gradients)."""

    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__(dim, hidden, dropout)
        self.hidden = hidden

    def forward(self, x):
        h = self.hidden
        w, b = self.w_in.weight, self.w_in.bias
        a = F.linear(x, w[:h], b[:h])
        g = F.linear(x, w[h:], b[h:])
        return self.w_out(self.drop(F.silu(a) * g))


class TextBlock(nn.Module):
    """Pre-norm block: x + attn(LN x), then x + SwiGLU(LN x); the attention takes the key
    mask (networks.vit.Block's layout, which has none)."""

    def __init__(self, cfg: TextConfig, layer_index: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = make_text_attention(cfg, layer_index)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.ffn = TextSwiGLU(cfg.dim, int(cfg.dim * cfg.mlp_ratio), cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, key_mask: Optional[torch.Tensor]
                ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, stats = self.attn(self.norm1(x), key_mask)
        x = x + self.drop(out)
        return x + self.drop(self.ffn(self.norm2(x))), stats

    def forward_with_maps(self, x) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        out, maps = self.attn.forward_with_maps(self.norm1(x))
        x = x + self.drop(out)
        return x + self.drop(self.ffn(self.norm2(x))), maps


class TextClassifier(LayerwiseExplain):
    def __init__(self, cfg: TextConfig):
        super().__init__()
        cfg.validate()
        self.max_tokens = cfg.max_tokens
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=cfg.pad_id)
        nn.init.normal_(self.tok_embed.weight, std=0.02)
        with torch.no_grad():
            self.tok_embed.weight[cfg.pad_id].zero_()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.randn(1, cfg.max_tokens + 1, cfg.dim) * 0.02)
        self.blocks = nn.ModuleList([TextBlock(cfg, i) for i in range(cfg.depth)])
        self.norm = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.drop = nn.Dropout(cfg.dropout)

    def set_fused(self, enabled: bool):
        """use_fused on every attention: forward() runs the op library's kernels while
        gradients are off (gatescope.attention.fused)."""
        set_fused(self, enabled)

    @torch.jit.export
    def explain_begin(self, token_ids: torch.Tensor,
                      attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        if token_ids.shape[0] != 1:
            raise ValueError("explain takes one text")
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("explain takes one unpadded text")
        return self._tokens(token_ids)

    @torch.jit.export
    def explain(self, token_ids: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
        """Every layer's maps of one text at once (see explain_layer), plus "logits"."""
        return self._explain_from(self.explain_begin(token_ids, None))

    def _tokens(self, token_ids):
        """[B, T] ids -> [B, T+1, dim]: class token, then the pieces, plus positions."""
        if token_ids.dim() != 2:
            raise ValueError("token_ids must be [B, T]")
        t = token_ids.shape[1]
        if t > self.max_tokens:
            raise ValueError("more token ids than max_tokens")
        x = self.tok_embed(token_ids)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return self.drop(torch.cat([cls, x], dim=1) + self.pos_embed[:, :t + 1])

    def forward(self, token_ids: torch.Tensor, attention_mask: torch.Tensor
                ) -> Dict[str, torch.Tensor]:
        if attention_mask.shape != token_ids.shape:
            raise ValueError("attention_mask must have token_ids' shape [B, T]")
        t = self._tokens(token_ids)
        visible = torch.cat([torch.ones(token_ids.shape[0], 1, dtype=torch.bool,
                                        device=token_ids.device),
                             attention_mask.to(torch.bool)], dim=1)
        per_layer: Dict[str, List[torch.Tensor]] = {}
        for blk in self.blocks:
            t, stats = blk(t, visible)
            for name, value in stats.items():
                if name not in per_layer:
                    per_layer[name] = []
                per_layer[name].append(value)
        out = {"logits": self.head(self.norm(t)[:, 0])}
        for name, values in per_layer.items():
            out[name] = torch.stack(values, dim=1)
        return out


def build_text_classifier(cfg: TextConfig) -> TextClassifier:
    return TextClassifier(cfg)
