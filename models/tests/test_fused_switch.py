"""The one fused/eager switch (gatescope.attention.fused): with `use_fused` on, every
attention module trains through its eager reference (the op kernels have no backward) and,
with gradients off, runs its fused kernel, which equals the eager reference. Checked in
Python and under TorchScript; the op calls are observed with the profiler."""
import importlib
import inspect
import pkgutil

import pytest
import torch
from torch import nn

import gatescope.attention
import gatescope.networks
from gatescope.attention.dar import DarParams
from gatescope.attention.dgsa import MultiheadDGSA
from gatescope.attention.diff_attn import MultiheadDiffAttn
from gatescope.attention.fused import fused_active, set_fused
from gatescope.attention.mhsa import MultiheadSelfAttention
from gatescope.attention.ms_deform_attn import MSDeformAttn, level_start_index
from gatescope.attention.plug import PlugAttention
from gatescope.networks.gdla_mixer import GatedDiffLinearAttn

DIM, HEADS = 32, 4
DAR = DarParams(lam=0.4, rho=0.3)


def tokens(g, n=10):
    return (torch.randn(2, n, DIM, generator=g),)


def deform_inputs(g):
    shapes = torch.tensor([[4, 5], [2, 3]])
    s = int((shapes[:, 0] * shapes[:, 1]).sum())
    return (torch.randn(2, 6, DIM, generator=g), torch.rand(2, 6, 2, 2, generator=g),
            torch.randn(2, s, DIM, generator=g), shapes, level_start_index(shapes))


def grid_tokens(g):
    return (torch.randn(2, 4 * 5, DIM, generator=g), 4, 5)


# name -> (module factory, inputs, the op the fused path calls)
CASES = {
    "mhsa": (lambda: MultiheadSelfAttention(DIM, HEADS, use_fused=True), tokens,
             "dar_attention"),
    "mhsa_dar": (lambda: MultiheadSelfAttention(DIM, HEADS, dar=DAR, use_fused=True), tokens,
                 "dar_attention"),
    "dgsa": (lambda: MultiheadDGSA(DIM, HEADS, use_fused=True), tokens, "dgsa_attention"),
    "dgsa_dar": (lambda: MultiheadDGSA(DIM, HEADS, use_fused=True, dar=DAR), tokens,
                 "dar_attention"),
    "diff_attn": (lambda: MultiheadDiffAttn(DIM, HEADS, 1, use_fused=True), tokens,
                  "dar_attention"),
    "diff_attn_dar": (lambda: MultiheadDiffAttn(DIM, HEADS, 1, dar=DAR, use_fused=True),
                      tokens, "dar_attention"),
    "plug": (lambda: PlugAttention(DIM, HEADS, gated=True, use_fused=True), tokens,
             "plug_attention"),
    "plug_plain": (lambda: PlugAttention(DIM, HEADS, gated=False, use_fused=True), tokens,
                   "dar_attention"),
    "ms_deform": (lambda: MSDeformAttn(DIM, 2, HEADS, 2, use_fused=True), deform_inputs,
                  "ms_deform_attn"),
    "ms_deform_plug": (lambda: MSDeformAttn(DIM, 2, HEADS, 2, plug=True, use_fused=True),
                       deform_inputs, "ms_deform_attn"),
    "gdla": (lambda: GatedDiffLinearAttn(DIM, 2, use_fused=True), grid_tokens,
             "gdla_attention"),
}


def output(result):
    return result[0] if isinstance(result, tuple) else result


def perturbed(factory):
    """The module with every parameter moved off its initial value, so that gates that start
    off (PLuG) or all-zero weights (deformable attention) pass gradients to everything."""
    torch.manual_seed(0)
    module = factory()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return module


def gatescope_ops_called(fn):
    """(fn's result, names of the gatescope:: ops it ran)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    return result, {e.key for e in prof.key_averages() if e.key.startswith("gatescope::")}


def test_every_module_with_the_switch_is_covered():
    """Every module class of gatescope.attention and gatescope.networks that consults the
    switch is one of CASES, so a new fused module cannot miss these checks; and no module
    calls an op kernel without it."""
    found = set()
    for pkg in (gatescope.attention, gatescope.networks):
        for info in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
            module = importlib.import_module(info.name)
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, nn.Module) and cls.__module__ == info.name:
                    source = inspect.getsource(cls)
                    if "fused_active(" in source:
                        found.add(cls)
                    elif "torch.ops.gatescope" in source or "fused_attention(" in source:
                        pytest.fail(f"{cls.__name__} calls an op kernel without the switch")
    covered = {type(factory()) for factory, _, _ in CASES.values()}
    assert found == covered


def test_switch_follows_grad_mode():
    assert fused_active(True) is False  # gradients are on in tests by default
    with torch.no_grad():
        assert fused_active(True) and not fused_active(False)
    with torch.inference_mode():
        assert fused_active(True)
    scripted = torch.jit.script(fused_active)
    assert not scripted(True)
    with torch.no_grad():
        assert scripted(True) and not scripted(False)


@pytest.mark.parametrize("scripted", [False, True], ids=["eager", "torchscript"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_trains_eagerly_and_infers_fused(ops, name, scripted):
    factory, make_inputs, op = CASES[name]
    reference = perturbed(factory)
    module = perturbed(factory)
    set_fused(reference, False)
    assert module.use_fused
    if scripted:
        module = torch.jit.script(module)
    inputs = make_inputs(torch.Generator().manual_seed(2))

    # One training step with the switch on: the eager path runs and gradients flow.
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    before = {k: v.detach().clone() for k, v in module.named_parameters()}
    out, called = gatescope_ops_called(lambda: output(module(*inputs)))
    assert called == set()
    loss = out.square().mean()
    assert torch.isfinite(loss)
    loss.backward()
    for k, p in module.named_parameters():
        assert p.grad is not None, k
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, k
    optimizer.step()
    for k, p in module.named_parameters():
        assert not torch.equal(p.detach(), before[k]), k

    # Gradients off: the fused kernel runs and equals the eager reference (same weights).
    reference.load_state_dict(module.state_dict())
    with torch.no_grad():
        fused, called = gatescope_ops_called(lambda: output(module(*inputs)))
        eager, eager_called = gatescope_ops_called(lambda: output(reference(*inputs)))
    assert called == {f"gatescope::{op}"} and eager_called == set()
    assert torch.allclose(fused, eager, atol=1e-5), float((fused - eager).abs().max())
