#!/usr/bin/env python3
"""Calls each fused CUDA op once at a shape where it misses its speed goal
(benchmarks/bench_ops_gpu.py), for a profiler to capture one launch of each kernel:
  ncu --clock-control none -k regex:'Dgsa|Plug|Dar|Gdla' --section SpeedOfLight \\
      python3 scripts/gpu/ncu_ops.py
The op library comes from $GATESCOPE_OPS_LIB (gatescope.ops.load)."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "models"))
from gatescope import ops  # noqa: E402


def main():
    ops.load()
    g = torch.ops.gatescope
    gen = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape, dtype=torch.float16):
        return torch.randn(*shape, generator=gen, device="cuda", dtype=dtype)

    # ViT-S attention at N = 1024 (B 2, H 6), fp16: the shapes of the benchmark's table.
    b, h, n, d, dv = 2, 6, 1024, 64, 64
    g.dgsa_attention(rand(b, h, n, 32), rand(b, h, n, 32), rand(b, h, n, 32), rand(b, h, n, 32),
                     rand(b, h, n, dv), torch.rand(b, h, n, device="cuda").half())
    q, k, v = rand(b, h, n, d), rand(b, h, n, d), rand(b, h, n, dv)
    g.plug_attention(q, k, v, rand(b, n, d), rand(b, n, d),
                     torch.tensor([[0.6], [-0.8]], device="cuda").half(),
                     torch.tensor([0.2, 0.9], device="cuda").half(), d ** -0.5, d ** -0.5, True)
    g.dar_attention(q, k, v, None, False, 0.4, 0.5, 8.0, 0.0, 1)
    # PVT-GDLA stage 1 at a 512^2 input (N = 128^2), batch 8, fp32.
    b, h, n, dd = 8, 2, 128 * 128, 32
    f = torch.float32
    g.gdla_attention(rand(b, h, n, dd, dtype=f), rand(b, h, n, dd, dtype=f),
                     rand(b, h, n, dd, dtype=f), rand(b, h, n, dd, dtype=f),
                     rand(h, dd, dtype=f), rand(dd, dtype=f), 1e-5, 0)
    torch.cuda.synchronize()
    print("ran dgsa, plug, dar (fp16, B 2 x N 1024) and gdla (fp32, B 8 x N 16384) once each")


if __name__ == "__main__":
    main()
