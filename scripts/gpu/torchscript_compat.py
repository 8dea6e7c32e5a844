"""TorchScript compatibility check of the shipped models under another PyTorch (and CUDA).

The shipped model_repository/<name>/1/model.pt archives were scripted and saved by
PyTorch 1.13 (CPU). This script loads each of them under the PyTorch it runs with (e.g.
2.11 + CUDA 13 on a rented GPU machine), with the gatescope op library loaded first as the
server does, feeds the inputs saved by scripts/gpu/torchscript_reference.py and compares
every output tensor (forward, and the one explain pass: explain_begin / explain_layer /
explain_end) with the outputs PyTorch 1.13 gave:

  float tensors: max |a - b| and max scaled error |a - b| / max(1, |b|);
  integer / bool tensors: exact (count of differing elements);
  a missing tensor, an extra one, or a shape / dtype change is a failure noted per model.

Forward runs three times per device (TorchScript's profiling executor re-optimises the
graph after the first runs, so the served graph is not the first one) and every run is
compared; then a rough warm time of one forward (best of 3, synchronised on CUDA).
TF32 is off unless --tf32, so CUDA errors measure real differences, not reduced precision.
Every exception is caught per model and device; the run always ends with a JSON report
(--json, rewritten after every model) and a compact table on stdout; the exit status is 1
when any model errs, differs structurally or exceeds its tolerance, when a requested device
is missing, or when no model was checked.

  python3 scripts/gpu/torchscript_compat.py --ref .gpu_carry/torchscript_reference.pt \
      --devices cpu,cuda --json gpu_out/compat.json
"""
import argparse
import json
import math
import pathlib
import sys
import time
import traceback

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_ops():
    """Loads libgatescope_ops.so ($GATESCOPE_OPS_LIB or build/models/ops/); its path."""
    sys.path.insert(0, str(ROOT / "models"))
    from gatescope import ops
    return str(ops.load())


def strict_fp32():
    """TF32 off for matmul and cuDNN: fp32_precision from PyTorch 2.9, else the old flags."""
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        torch.backends.cudnn.conv.fp32_precision = "ieee"
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def run_model(model, entry, device, forward_runs=1):
    """Forward outputs (one dict per run) and the explain pass's maps, all on CPU."""
    inputs = [t.to(device) for t in entry["inputs"]]
    with torch.inference_mode():
        runs = [{k: v.cpu() for k, v in model(*inputs).items()} for _ in range(forward_runs)]
        maps = {}
        if entry.get("explain_layers", 0) > 0:
            ex = [t.to(device) for t in entry["explain_inputs"]]
            args = entry["explain_args"].tolist()  # e.g. a segmenter's query [y, x]
            state = model.explain_begin(*ex, args) if args else model.explain_begin(*ex)
            for layer in range(entry["explain_layers"]):
                state, m = model.explain_layer(state, layer)
                maps.update({f"explain/{layer}/{k}": v.cpu() for k, v in m.items()})
            maps.update({f"explain/end/{k}": v.cpu() for k, v in model.explain_end(state).items()})
    return runs, maps


def compare(got, ref):
    """(max abs diff, max scaled error, note); inf and a note on a structural mismatch."""
    if tuple(got.shape) != tuple(ref.shape) or got.dtype != ref.dtype:
        return math.inf, math.inf, (f"{tuple(got.shape)} {got.dtype} != "
                                    f"{tuple(ref.shape)} {ref.dtype}")
    if got.numel() == 0:
        return 0.0, 0.0, ""
    if not ref.is_floating_point():
        n, d = int((got != ref).sum()), float((got.long() - ref.long()).abs().max())
        return d, d, f"{n} elements differ" if n else ""
    a, b = got.double(), ref.double()
    d = (a - b).abs()
    d[(a == b) | (a.isnan() & b.isnan())] = 0.0  # equal infinities, NaN where NaN
    d[d.isnan()] = math.inf
    scale = b.abs().nan_to_num(nan=1.0, posinf=1.0).clamp(min=1.0)
    return float(d.max()), float((d / scale).max()), ""


def check_device(path, entry, device, time_runs=3):
    """One model on one device: every tensor compared with the reference, and timing."""
    res = {"loaded": False, "max_abs": None, "max_scaled": None, "worst": "", "notes": []}
    try:
        model = torch.jit.load(str(path), map_location=device).eval()
        res["loaded"] = True
        runs, maps = run_model(model, entry, device, forward_runs=3)
        tensors = {}
        for i, out in enumerate(runs):
            ref = entry["outputs"]
            missing, extra = sorted(set(ref) - set(out)), sorted(set(out) - set(ref))
            if (missing or extra) and i == 0:
                res["notes"].append(f"forward keys: missing {missing} extra {extra}")
            for k in set(ref) & set(out):
                tensors[f"run{i}/{k}"] = compare(out[k], ref[k])
        ref_maps = entry.get("explain", {})
        if set(ref_maps) != set(maps):
            res["notes"].append(f"explain keys: missing {sorted(set(ref_maps) - set(maps))} "
                                f"extra {sorted(set(maps) - set(ref_maps))}")
        for k in set(ref_maps) & set(maps):
            tensors[k] = compare(maps[k], ref_maps[k])
        res["tensors"] = {k: {"abs": a, "scaled": s, "note": n} for k, (a, s, n) in
                          sorted(tensors.items())}
        res["notes"] += [f"{k}: {n}" for k, (_, _, n) in sorted(tensors.items()) if n]
        if tensors:
            worst = max(tensors, key=lambda k: tensors[k][1])
            res["worst"] = worst
            res["max_scaled"] = tensors[worst][1]
            res["max_abs"] = max(v[0] for v in tensors.values())
        inputs = [t.to(device) for t in entry["inputs"]]
        times = []
        with torch.inference_mode():
            for _ in range(time_runs):
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(*inputs)
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        res["forward_ms"] = round(1000 * min(times), 3)
    except Exception as e:  # one-shot run: report and go on
        res["error"] = f"{type(e).__name__}: {e}"[:2000]
        res["traceback"] = traceback.format_exc()[-4000:]
    return res


def fmt(res, tol):
    if res is None:
        return "-"
    if res.get("error"):
        return "ERROR"
    s = res["max_scaled"]
    return "n/a" if s is None else f"{s:.1e}" + ("" if s <= tol else "!")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", default=str(ROOT / ".gpu_carry/torchscript_reference.pt"))
    p.add_argument("--repo", default=str(ROOT / "model_repository"))
    p.add_argument("--devices", default="cpu,cuda")
    p.add_argument("--models", default="", help="comma-separated subset (default: all)")
    p.add_argument("--json", default="", help="write the full report here")
    p.add_argument("--tf32", action="store_true", help="leave TF32 at PyTorch's defaults")
    p.add_argument("--cpu-tol", type=float, default=1e-4)
    p.add_argument("--cuda-tol", type=float, default=1e-3)
    a = p.parse_args()
    t_start = time.time()
    report = {"torch": str(torch.__version__), "cuda": torch.version.cuda,
              "cuda_available": torch.cuda.is_available(), "models": {}}
    devices = [d for d in a.devices.split(",") if d]
    missing_device = "cuda" in devices and not torch.cuda.is_available()
    if missing_device:  # reported, and the run fails: a device check that checked no device
        report["notes"] = "cuda requested but not available"
        devices.remove("cuda")
    if torch.cuda.is_available():
        report["gpu"] = torch.cuda.get_device_name(0)
        try:
            if not a.tf32:
                strict_fp32()
        except Exception as e:
            report["tf32_error"] = f"{type(e).__name__}: {e}"
    try:
        report["ops_library"] = load_ops()
    except Exception as e:
        report["ops_error"] = f"{type(e).__name__}: {e}"
    ref = torch.load(a.ref, map_location="cpu", weights_only=True)
    report["reference_torch"] = ref.get("torch")
    # By default every model that has both a reference and an archive in --repo (a device
    # run may carry only part of the repository).
    wanted = [m for m in a.models.split(",") if m] or sorted(
        m for m in ref["models"] if (pathlib.Path(a.repo) / m / "1" / "model.pt").is_file())
    for name in wanted:
        print(f"checking {name} on {devices}", file=sys.stderr, flush=True)
        entry, path = ref["models"].get(name), pathlib.Path(a.repo) / name / "1" / "model.pt"
        if entry is None or not path.is_file():
            report["models"][name] = {"error": "no reference entry or no model.pt"}
        else:
            report["models"][name] = {d: check_device(path, entry, d) for d in devices}
        report["seconds"] = round(time.time() - t_start, 1)
        if a.json:  # after every model, so a crash (e.g. a CUDA abort) keeps what was done
            pathlib.Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            pathlib.Path(a.json).write_text(json.dumps(report, indent=1, default=str))
    print(f"torch {report['torch']} (reference {report['reference_torch']}), cuda "
          f"{report['cuda']}, gpu {report.get('gpu', '-')}, ops "
          f"{report.get('ops_library') or report.get('ops_error')}, tf32 {a.tf32}")
    print(f"{'model':24} {'loads':5} {'cpu err':9} {'cuda err':9} {'cuda ms':8} notes")
    failed = False
    for name, r in report["models"].items():
        cpu, cuda = r.get("cpu"), r.get("cuda")
        loads = all(x["loaded"] for x in (cpu, cuda) if x) and not r.get("error")
        notes = [r["error"]] if r.get("error") else []
        for d, x, tol in (("cpu", cpu, a.cpu_tol), ("cuda", cuda, a.cuda_tol)):
            if x and x.get("error"):
                first = [ln for ln in x["error"].splitlines()[1:] if ln.strip()][:1]
                notes.append(f"{d}: {x['error'].splitlines()[0]} {' '.join(first)}"[:160])
            elif x and x["max_scaled"] is not None and x["max_scaled"] > tol:
                notes.append(f"{d} worst {x['worst']}")
            notes += [f"{d} {n}"[:120] for n in (x or {}).get("notes", [])[:3]]
        failed |= bool(notes)
        ms = cuda.get("forward_ms", "-") if cuda else "-"
        print(f"{name:24} {'yes' if loads else 'NO':5} {fmt(cpu, a.cpu_tol):9} "
              f"{fmt(cuda, a.cuda_tol):9} {ms!s:8} {'; '.join(notes)}")
    print(f"({report['seconds']} s; scaled error |a-b|/max(1,|b|) over forward x3 + explain; "
          f"'!' above tolerance cpu {a.cpu_tol:g} / cuda {a.cuda_tol:g})")
    if not report["models"] or missing_device:
        print("nothing checked on a requested device" if missing_device else "no model checked")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
