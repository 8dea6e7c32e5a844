"""The all-layers-at-once explain() of the classifier contract, shared by the networks that
implement the layer-at-a-time one (explain_begin / explain_layer / explain_end over
self.blocks). TorchScript compiles it per subclass, so it calls their methods."""
from typing import Dict, List

import torch
from torch import nn


class LayerwiseExplain(nn.Module):
    @torch.jit.export
    def explain(self, x: torch.Tensor) -> Dict[str, List[torch.Tensor]]:
        """Every layer's maps at once (see the subclass's explain_layer), plus "logits"."""
        t = self.explain_begin(x)
        out: Dict[str, List[torch.Tensor]] = {}
        for layer in range(len(self.blocks)):
            t, maps = self.explain_layer(t, layer)
            for name, m in maps.items():
                if name not in out:
                    out[name] = []
                out[name].append(m)
        out["logits"] = [self.explain_end(t)["logits"]]
        return out
