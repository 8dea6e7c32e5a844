"""The explain contract of the token classifiers (ViT family and DeiT), shared: subclasses
provide _tokens(x) (patch embedding, class token, position), self.blocks (each with
forward_with_maps(t) -> (t, maps)), self.norm and self.head.

  explain_begin(x) -> tokens; explain_layer(tokens, l) -> (tokens, block l's maps);
  explain_end(tokens) -> {"logits"}; explain(x): every layer's maps at once.

TorchScript compiles these per subclass, so they call the subclass's parts."""
from typing import Dict, List, Tuple

import torch
from torch import nn


class LayerwiseExplain(nn.Module):
    @torch.jit.export
    def explain_begin(self, x: torch.Tensor) -> torch.Tensor:
        return self._tokens(x)

    @torch.jit.export
    def explain_layer(self, t: torch.Tensor, layer: int
                      ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Runs block `layer` on tokens `t`; its maps: attention [B, H, N, N], and per family
        gate [B, H, N], resonance [B, H, N, N], vigilance [B, H], plug_gate [B, N, N]."""
        if layer < 0 or layer >= len(self.blocks):
            raise ValueError("layer out of range")
        maps: Dict[str, torch.Tensor] = {}
        for i, blk in enumerate(self.blocks):
            if i == layer:
                t, maps = blk.forward_with_maps(t)
        return t, maps

    @torch.jit.export
    def explain_end(self, t: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {"logits": self.head(self.norm(t)[:, 0])}

    @torch.jit.export
    def explain(self, x: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
        """Every layer's maps at once (see explain_layer), plus "logits"."""
        return self._explain_from(self.explain_begin(x))

    def _explain_from(self, t: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
        """explain() after explain_begin: every layer's maps from tokens `t`."""
        out: Dict[str, List[torch.Tensor]] = {}
        for layer in range(len(self.blocks)):
            t, maps = self.explain_layer(t, layer)
            for name, m in maps.items():
                if name not in out:
                    out[name] = []
                out[name].append(m)
        out["logits"] = [self.explain_end(t)["logits"]]
        return out
