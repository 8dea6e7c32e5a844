"""Holds a module's DAR settings as TorchScript-friendly attributes."""
from typing import Optional

from torch import nn

from gatescope.attention.dar import DarParams


class DarSettings(nn.Module):
    """No parameters: DAR adds no learned tensors. `enabled` False means plain softmax."""

    def __init__(self, dar: Optional[DarParams]):
        super().__init__()
        self.enabled = dar is not None
        p = dar if dar is not None else DarParams()
        p.validate()
        self.lam = float(p.lam)
        self.rho = float(p.rho)
        self.alpha = float(p.alpha)
        self.beta = float(p.beta)
        self.steps = int(p.steps)
