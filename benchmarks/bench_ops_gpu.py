#!/usr/bin/env python3
"""The five fused ops on CUDA vs their honest competitors of the same shape, in one run
(docs/gpu.md). Sized for one ~90 s run on a scarce machine: what is left after
--budget-s is skipped, and one op's failure is reported without stopping the others.

What is compared (ours = torch.ops.gatescope.*; goal as ours/competitor time unless noted):
  dgsa       M-DGSA vs a differential-attention baseline of two SDPA calls plus the gate
             combine g*A+V - (1-g)*A-V (the same function; ViT-S: H 6, d' 32 per stream,
             dv 64).                                                      goal <= 1.10x
  plug       PLuG (tanh gate, dg = d) vs one SDPA call (H 6, d = dv 64).  goal <= 1.60x
  dar        DAR (lam 0.4, rho 0.5, alpha 8, one step) vs one SDPA call;  goal <= 1.15x
             also lam = 0 (plain softmax attention: the same function as SDPA).
  gdla       fraction of HBM bandwidth: the fewest bytes (q, k, v, g, lam, weight read once,
             out written once) over the measured time, against the datasheet (judged) and
             against a device-to-device copy measured in this run; PVT-GDLA stage-1 decoder
             shapes (dim 64, 2 heads, D 32) at N = 56^2 (224^2 input) and 128^2 (512^2),
             batch 1 and 8, plus batch 1 with the strided q/k/v/g views the shipped block
             passes. The eager reference is timed alongside.        goal >= 60 % of HBM
  ms_deform  vs the pure-PyTorch grid_sample implementations (the public core_pytorch form,
             gatescope.attention.ms_deform, and the module's level-by-level eager path);
             8 heads, 32 channels, 4 points.                       goal >= 1.5x speed-up
Attention sizes: (B, N) = (8, 197), (2, 1024), (1, 4096); fp32 and fp16; random inputs.
SDPA runs with PyTorch's default backend choice (the header lists the enabled backends,
each row's check column the one picked for that shape).

Timing: median of CUDA-event-timed repeats after warm-up, the L2 cache flushed (256 MiB
written) before each repeat outside the timed span, so every op reads its inputs from HBM;
host launch overhead mostly hides behind the flush: these are device times. Peak memory:
torch.cuda.max_memory_allocated above the allocation before one call (inputs excluded, the
output included). Every timed output of ours is checked finite; where the competitor
computes the same function the max |ours - competitor| is shown too (correctness proper is
models/tests/test_ops_cuda.py's job).

Usage (from the checkout; the op library from $GATESCOPE_OPS_LIB or build/models/ops/):
  PYTHONPATH=models python3 benchmarks/bench_ops_gpu.py [--device cuda|cpu] [--quick]
      [--json PATH] [--only dgsa,plug,dar,gdla,ms_deform] [--budget-s 70]
--device cpu --quick is a dry run of this script's logic (tiny sizes, few repeats).
"""
import argparse
import importlib.util
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

OPS = ("dgsa", "plug", "dar", "gdla", "ms_deform")
HEADS, HEAD_DIM, DGSA_DIM = 6, 64, 32            # ViT-S: dim 384, 6 heads
ATTN_SIZES = {False: [(8, 197), (2, 1024), (1, 4096)], True: [(2, 17), (1, 40)]}
DAR = dict(rho=0.5, alpha=8.0, beta=0.0, steps=1)
PLUG_W, PLUG_B = (0.6, -0.8), (0.2, 0.9)
GDLA_HEADS, GDLA_DIM = 2, 32                    # PVT-v2 b2 stage 1: dim 64, 2 heads
GDLA_SIDES = {False: [56, 128], True: [7, 12]}  # 224^2 and 512^2 inputs at stride 4
GDLA_BATCHES = {False: [1, 8], True: [1, 2]}
MSD_HEADS, MSD_CH, MSD_POINTS = 8, 32, 4
SMALL_PYR, LARGE_PYR = [(32, 32), (16, 16), (8, 8), (4, 4)], [(64, 64), (32, 32), (16, 16), (8, 8)]
# name -> (batch, queries (None: every position, the encoder), levels); the first three are
# bench_ms_deform_cpu.py's cases, the last a COCO-sized (800 x 1216) encoder.
MSD_CASES = {False: {"dec-300": (2, 300, SMALL_PYR), "dec-1000": (2, 1000, LARGE_PYR),
                     "enc-5440": (1, None, LARGE_PYR),
                     "enc-coco": (2, None, [(100, 152), (50, 76), (25, 38), (13, 19)])},
             True: {"dec-10": (2, 10, [(6, 4), (3, 2)]), "enc-30": (1, None, [(6, 4), (3, 2)])}}
DATASHEET_TBPS = [("H200", 4.8), ("H100 PCIe", 2.0), ("H100 NVL", 3.9), ("H100", 3.35)]
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def sdpa(q, k, v):
    """The competitor: F.scaled_dot_product_attention. Where torch has none (the 1.13 of the
    CPU dry run) an explicit softmax(q k^T / sqrt(d)) v in fp32 stands in."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v)
    s = (q.float() @ k.float().transpose(-2, -1)) * q.shape[-1] ** -0.5
    return (s.softmax(-1) @ v.float()).to(q.dtype)


def sdpa_backend(q, k, v):
    """The SDPA backend PyTorch picks for these inputs (its private chooser; '?' if absent)."""
    try:
        from torch.nn.attention import SDPBackend
        return SDPBackend(torch._fused_sdp_choice(q, k, v)).name.lower()
    except Exception:  # noqa: BLE001 -- informational only
        return "math-fallback" if not hasattr(F, "scaled_dot_product_attention") else "?"


class Bench:
    """Times and measures one callable; holds the run's deadline and the L2 flush buffer."""

    def __init__(self, device, quick, budget_s):
        self.device, self.cuda = device, device.type == "cuda"
        self.warmup, self.repeats = (1, 3) if quick else (3, 25)
        self.deadline = time.perf_counter() + budget_s
        self.flush = (torch.empty(256 << 20, dtype=torch.uint8, device=device)
                      if self.cuda else None)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def measure(self, fn, flush=True):
        """{ms: median, peak_mib, out} of fn(); repeats shrink for slow calls (~0.4 s each)."""
        if time.perf_counter() > self.deadline:
            raise TimeoutError("time budget spent: skipped")
        # The last warm-up call (caches warm) sets the repeat count; a slow one ends warm-up.
        for _ in range(self.warmup):
            t0 = time.perf_counter()
            fn()
            self.sync()
            per_call = time.perf_counter() - t0
            if per_call > 0.2:
                break
        repeats = max(3, min(self.repeats, int(0.4 / max(per_call, 1e-6))))
        peak = None
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            out = fn()
            self.sync()
            peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
        else:
            out = fn()
        times = []
        for _ in range(repeats):
            if self.cuda:
                if flush:
                    self.flush.zero_()
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t = time.perf_counter()
                fn()
                times.append(1000 * (time.perf_counter() - t))
        times.sort()
        return dict(ms=times[len(times) // 2], peak_mib=peak, out=out, repeats=repeats)


def record(rows, bench, op, dtype, shape, ours, competitor, name, goal, same=False, note="",
           hbm_bytes=None, bandwidth=None):
    """Runs (or reuses, when already a measure() dict) both sides and appends one row; an
    error on either side is recorded in the row instead of raised."""
    row = dict(op=op, dtype=dtype, shape=shape, competitor=name, goal=goal, note=note)
    for side, fn in (("ours", ours), ("comp", competitor)):
        try:
            m = fn if isinstance(fn, dict) else bench.measure(fn)
            row[f"{side}_ms"], row[f"{side}_peak_mib"] = m["ms"], m["peak_mib"]
            row[f"{side}_repeats"] = m["repeats"]
            row[f"_{side}_out"] = m["out"][0] if isinstance(m["out"], tuple) else m["out"]
        except Exception as e:  # noqa: BLE001 -- one-shot run: record and go on
            row[f"{side}_error"] = f"{type(e).__name__}: {e}"[:300]
            print(f"[{op} {dtype} {shape}] {side} failed: {row[f'{side}_error']}", flush=True)
    out, ref = row.pop("_ours_out", None), row.pop("_comp_out", None)
    if out is not None:
        row["finite"] = bool(torch.isfinite(out).all())
        if same and ref is not None and ref.shape == out.shape:
            row["max_abs_diff"] = float((out.float() - ref.float()).abs().max())
    if "ours_ms" in row and "comp_ms" in row:
        row["ratio"] = row["ours_ms"] / row["comp_ms"]
    if hbm_bytes is not None and "ours_ms" in row:
        row.update(bandwidth, bytes=hbm_bytes, gbps=hbm_bytes / row["ours_ms"] / 1e6)
    row["metric"], row["met"] = judge(row)
    rows.append(row)
    print(f"  {op} {dtype} {shape}: ours {fmt(row.get('ours_ms'))} ms, {name} "
          f"{fmt(row.get('comp_ms'))} ms", flush=True)
    return row


def gen_randn(device, seed):
    """Seeded standard-normal tensors, drawn in fp32 and rounded to dtype."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return lambda *shape, dtype: torch.randn(*shape, generator=g, device=device).to(dtype)


def run_dgsa(rows, bench, dtypes, quick, info):
    ops = torch.ops.gatescope
    for b, n in ATTN_SIZES[quick]:
        for dn, dt in dtypes.items():
            r = gen_randn(bench.device, n)
            qp, kp, qn, kn = (r(b, HEADS, n, DGSA_DIM, dtype=dt) for _ in range(4))
            v = r(b, HEADS, n, HEAD_DIM, dtype=dt)
            gate = torch.sigmoid(r(b, HEADS, n, dtype=torch.float32)).to(dt)
            g4 = gate.unsqueeze(-1)
            record(rows, bench, "dgsa", dn, (b, n),
                   lambda: ops.dgsa_attention(qp, kp, qn, kn, v, gate),
                   lambda: g4 * sdpa(qp, kp, v) - (1.0 - g4) * sdpa(qn, kn, v),
                   "2x SDPA + gate", ("max_ratio", 1.1), same=True, note=sdpa_backend(qp, kp, v))


def run_plug(rows, bench, dtypes, quick, info):
    ops = torch.ops.gatescope
    for b, n in ATTN_SIZES[quick]:
        for dn, dt in dtypes.items():
            r = gen_randn(bench.device, n + 1)
            q, k, v = (r(b, HEADS, n, HEAD_DIM, dtype=dt) for _ in range(3))
            qg, kg = r(b, n, HEAD_DIM, dtype=dt), r(b, n, HEAD_DIM, dtype=dt)
            w = torch.tensor(PLUG_W, device=bench.device, dtype=dt).view(2, 1)
            bias = torch.tensor(PLUG_B, device=bench.device, dtype=dt)
            s = HEAD_DIM ** -0.5
            record(rows, bench, "plug", dn, (b, n),
                   lambda: ops.plug_attention(q, k, v, qg, kg, w, bias, s, s, True),
                   lambda: sdpa(q, k, v), "SDPA", ("max_ratio", 1.6), note=sdpa_backend(q, k, v))


def run_dar(rows, bench, dtypes, quick, info):
    ops = torch.ops.gatescope
    for lam in (0.4, 0.0):
        for b, n in ATTN_SIZES[quick]:
            for dn, dt in dtypes.items():
                r = gen_randn(bench.device, n + 2)
                q, k, v = (r(b, HEADS, n, HEAD_DIM, dtype=dt) for _ in range(3))
                record(rows, bench, f"dar lam={lam:g}", dn, (b, n),
                       lambda: ops.dar_attention(q, k, v, None, False, lam, DAR["rho"],
                                                 DAR["alpha"], DAR["beta"], DAR["steps"]),
                       lambda: sdpa(q, k, v), "SDPA", ("max_ratio", 1.15), same=lam == 0.0,
                       note=sdpa_backend(q, k, v))


def copy_bandwidth(bench, quick):
    """Bytes read + written per second of one large device-to-device copy (the achievable
    streaming rate), GB/s."""
    size = (16 if quick else 1024) << 20
    src = torch.empty(size, dtype=torch.uint8, device=bench.device).random_()
    dst = torch.empty_like(src)
    ms = bench.measure(lambda: dst.copy_(src), flush=False)["ms"]
    return 2 * size / ms / 1e6


def datasheet_gbps(device):
    if device.type != "cuda":
        return None, None
    name = torch.cuda.get_device_name(device)
    for key, tbps in DATASHEET_TBPS:
        if key in name:
            return tbps * 1000, f"{key} {tbps} TB/s"
    return None, None


def run_gdla(rows, bench, dtypes, quick, info):
    from gatescope.attention.gdla import gdla_reference
    ops = torch.ops.gatescope
    info["copy_gbps"] = copy_bandwidth(bench, quick)
    info["datasheet_gbps"], info["datasheet"] = datasheet_gbps(bench.device)
    bandwidth = dict(copy_gbps=info["copy_gbps"], datasheet_gbps=info["datasheet_gbps"])
    for side in GDLA_SIDES[quick]:
        n = side * side
        for b in GDLA_BATCHES[quick]:
            for strided in ((False, True) if b == 1 else (False,)):
                for dn, dt in dtypes.items():
                    r = gen_randn(bench.device, n + b)
                    if strided:  # as GDLAM passes them: views of one [B, N, 4, H, D] tensor
                        p = r(b, n, 4, GDLA_HEADS, GDLA_DIM, dtype=dt).permute(2, 0, 3, 1, 4)
                        q, k, v, g = p[0], p[1], p[2], p[3]
                    else:
                        q, k, v, g = (r(b, GDLA_HEADS, n, GDLA_DIM, dtype=dt) for _ in range(4))
                    lam = 0.1 * r(GDLA_HEADS, GDLA_DIM, dtype=dt)
                    w = 1.0 + 0.1 * r(GDLA_DIM, dtype=dt)
                    nbytes = (5 * q.numel() + lam.numel() + w.numel()) * q.element_size()
                    record(rows, bench, "gdla" + (" strided" if strided else ""), dn, (b, n),
                           lambda: ops.gdla_attention(q, k, v, g, lam, w, 1e-5, 0),
                           lambda: gdla_reference(q, k, v, g, lam, w, 1e-5, 0), "eager ref",
                           ("min_hbm", 0.6), same=True, hbm_bytes=nbytes, bandwidth=bandwidth)


def run_ms_deform(rows, bench, dtypes, quick, info):
    from gatescope.attention.ms_deform import level_start_index, ms_deform_attn_reference
    from gatescope.attention.ms_deform_attn import ms_deform_attn_eager
    ops = torch.ops.gatescope
    for case, (b, queries, levels) in MSD_CASES[quick].items():
        shapes_cpu = torch.tensor(levels, dtype=torch.long)
        s = int((shapes_cpu[:, 0] * shapes_cpu[:, 1]).sum())
        lq = s if queries is None else queries
        shapes = shapes_cpu.to(bench.device)
        starts = level_start_index(shapes_cpu).to(bench.device)
        for dn, dt in dtypes.items():
            g = torch.Generator(device=bench.device)
            g.manual_seed(lq)
            u = lambda *sh: torch.rand(*sh, generator=g, device=bench.device)  # noqa: E731
            value = (2 * u(b, s, MSD_HEADS, MSD_CH) - 1).to(dt)
            # Reference points inside the maps plus offsets, a few landing outside.
            loc = (u(b, lq, MSD_HEADS, len(levels), MSD_POINTS, 2) * 1.1 - 0.05).to(dt)
            w = u(b, lq, MSD_HEADS, len(levels) * MSD_POINTS).softmax(-1)
            w = w.view(b, lq, MSD_HEADS, len(levels), MSD_POINTS).to(dt)
            ours = None
            # Shapes as host data for the competitors: no device sync inside their timing.
            competitors = (
                ("grid_sample core", lambda: ms_deform_attn_reference(value, levels, loc, w)),
                ("grid_sample eager", lambda: ms_deform_attn_eager(value, shapes_cpu, loc, w)))
            for name, comp in competitors:
                row = record(rows, bench, f"ms_deform {case}", dn, (b, lq),
                             ours or (lambda: ops.ms_deform_attn(value, shapes, starts, loc, w)),
                             comp, name, ("min_speedup", 1.5), same=True, note=f"S={s}")
                if ours is None and "ours_ms" in row:  # time ours once per case and dtype
                    ours = dict(ms=row["ours_ms"], peak_mib=row["ours_peak_mib"],
                                repeats=row["ours_repeats"],
                                out=ops.ms_deform_attn(value, shapes, starts, loc, w))


def judge(row):
    """(metric text, met?) of a row against its goal."""
    kind, target = row["goal"]
    if kind == "min_hbm":
        if "gbps" not in row:
            return "-", None
        # Judged against the datasheet; against the measured copy where it is unknown.
        sheet, copy = row["datasheet_gbps"], row["copy_gbps"]
        text = f"{row['gbps']:.0f} GB/s = " + (f"{row['gbps'] / sheet:.0%} HBM, " if sheet else "")
        text += f"{row['gbps'] / copy:.0%} copy"
        return text, row["gbps"] / (sheet or copy) >= target
    if "ratio" not in row:
        return "-", None
    if kind == "min_speedup":
        return f"{1 / row['ratio']:.2f}x faster", 1 / row["ratio"] >= target
    return f"{row['ratio']:.2f}x", row["ratio"] <= target


GOAL_TEXT = {"max_ratio": "<= {:g}x", "min_speedup": ">= {:g}x faster", "min_hbm": ">= {:.0%} HBM"}


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def print_table(rows, info):
    print(f"\n## gatescope ops vs competitors: {info['device_name']}, torch {info['torch']}, "
          f"CUDA {info['cuda']}; SDPA enabled: {info['sdpa_enabled']}; "
          f"copy {fmt(info.get('copy_gbps'), '.0f')} GB/s, datasheet {info.get('datasheet')}")
    print("| op | dtype | B x N | ours ms | competitor | comp ms | ours/comp | metric | goal "
          "| met? | peak MiB ours/comp | check |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        metric, met = r["metric"], r["met"]
        check = [] if r.get("finite", True) else ["NON-FINITE"]
        if "max_abs_diff" in r:
            check.append(f"diff {r['max_abs_diff']:.1e}")
        if r.get("note"):
            check.append(r["note"])
        for side in ("ours", "comp"):
            if f"{side}_error" in r:
                check.append(f"{side} ERROR: {r[f'{side}_error'][:80]}")
        kind, target = r["goal"]
        print(f"| {r['op']} | {r['dtype']} | {r['shape'][0]} x {r['shape'][1]} | "
              f"{fmt(r.get('ours_ms'))} | {r['competitor']} | {fmt(r.get('comp_ms'))} | "
              f"{fmt(r.get('ratio'), '.2f')} | {metric} | {GOAL_TEXT[kind].format(target)} | "
              f"{'-' if met is None else ('yes' if met else 'NO')} | "
              f"{fmt(r.get('ours_peak_mib'), '.1f')} / {fmt(r.get('comp_peak_mib'), '.1f')} | "
              f"{'; '.join(check)} |")


def sdpa_enabled(cuda):
    flags = ("flash", "mem_efficient", "math", "cudnn")
    on = [f for f in flags if cuda and getattr(torch.backends.cuda, f"{f}_sdp_enabled",
                                               lambda: False)()]
    return ", ".join(on) if on else "n/a"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, few repeats (dry run)")
    ap.add_argument("--json", help="write every row and the run's settings here")
    ap.add_argument("--only", help=f"comma-separated subset of {','.join(OPS)}")
    ap.add_argument("--budget-s", type=float, default=70.0,
                    help="after this many seconds the remaining cases are skipped")
    a = ap.parse_args()
    only = OPS if not a.only else [o.strip() for o in a.only.split(",") if o.strip()]
    if set(only) - set(OPS):
        ap.error(f"unknown op(s) {sorted(set(only) - set(OPS))}; choose from {OPS}")
    if importlib.util.find_spec("gatescope") is None:  # from the checkout, not installed
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
    from gatescope import ops as gs_ops
    lib = gs_ops.load()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --device cpu --quick for a dry run")
    if not cuda:
        torch.set_num_threads(1)  # a dry run: fewer scheduler stalls on a shared host
    bench = Bench(device, a.quick, a.budget_s)
    info = dict(device_name=torch.cuda.get_device_name(device) if cuda else "CPU",
                torch=torch.__version__, cuda=torch.version.cuda, library=str(lib),
                quick=a.quick, warmup=bench.warmup, max_repeats=bench.repeats,
                timer="cuda events, L2 flushed per repeat" if cuda else "perf_counter",
                tf32_matmul=torch.backends.cuda.matmul.allow_tf32 if cuda else None,
                sdpa_enabled=sdpa_enabled(cuda), heads=HEADS, head_dim=HEAD_DIM,
                dgsa_stream_dim=DGSA_DIM, gdla_heads=GDLA_HEADS, gdla_dim=GDLA_DIM)
    print(f"{info['device_name']} | torch {info['torch']} | library {lib} | "
          f"budget {a.budget_s:.0f} s", flush=True)
    rows, failures = [], {}
    with torch.inference_mode():
        for op in only:
            t0 = time.perf_counter()
            try:
                globals()[f"run_{op}"](rows, bench, DTYPES, a.quick, info)
            except Exception:  # noqa: BLE001 -- one op's failure must not stop the others
                failures[op] = traceback.format_exc()
                print(f"[{op}] section failed:\n{failures[op][-1500:]}", flush=True)
            print(f"[{op}] {time.perf_counter() - t0:.1f} s", flush=True)
            if a.json:  # after every section: a killed run keeps what it measured
                with open(a.json, "w") as f:
                    json.dump(dict(info=info, rows=rows, section_failures=failures), f,
                              indent=1, default=str)
    print_table(rows, info)
    for op, tb in failures.items():
        print(f"SECTION FAILED {op}: {tb.strip().splitlines()[-1]}")
    met = [r["met"] for r in rows if r["met"] is not None]
    print(f"goals met: {sum(met)}/{len(met)}; rows {len(rows)}; "
          f"{time.perf_counter() - bench.deadline + a.budget_s:.1f} s")
    # A missed goal is a measurement; a failed section, an error or a non-finite output is not.
    broken = [r for r in rows if r.get("finite") is False or any(k.endswith("_error") for k in r)]
    return 1 if failures or broken else 0


if __name__ == "__main__":
    sys.exit(main())
