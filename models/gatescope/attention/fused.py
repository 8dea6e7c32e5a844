"""The one fused/eager switch shared by every attention module.

The op library's kernels (torch.ops.gatescope.*) are forward only: they have no autograd
formula. A module with `use_fused` set calls its kernel only while gradients are off
(torch.no_grad, torch.inference_mode, the server's InferenceMode) and runs its eager
reference otherwise, so a model trained, fine-tuned or checked with gradients while the
switch is on still gets correct gradients. `fused_active` compiles under TorchScript
(torch.is_grad_enabled is a TorchScript builtin), so exported models decide at run time.
"""
import torch
from torch import nn


def fused_active(use_fused: bool) -> bool:
    """Whether a module whose switch is `use_fused` runs its fused kernel now."""
    return use_fused and not torch.is_grad_enabled()


def set_fused(module: nn.Module, enabled: bool) -> int:
    """Sets `use_fused` on `module` and every submodule that has the switch; returns how
    many were set. Call it before torch.jit.script: some modules hold the switch as a
    torch.jit.Final constant."""
    count = 0
    for m in module.modules():
        if hasattr(m, "use_fused"):
            m.use_fused = enabled
            count += 1
    return count
