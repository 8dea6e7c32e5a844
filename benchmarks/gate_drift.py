#!/usr/bin/env python3
"""How the served gate and vigilance statistics move when inputs are corrupted.

Starts gatescope-server on the shipped models, sends the first --images Fashion-MNIST test
images to each model through KServe ModelInfer, clean and with additive Gaussian noise of
several standard deviations (pixels in [0, 1], clipped), and reads back from /metrics the
per-layer histograms an operator would watch: gatescope_gate_mean (M-DGSA),
gatescope_vigilance_crossing (DAR) and gatescope_plug_scale_mean (PLuG; the segmenter and
detector: benchmarks/gate_drift_models.py). Prints, per model and noise level, the accuracy
and the per-layer mean of each statistic over the served requests (histogram sum / count
deltas).

Usage: /usr/bin/python3 benchmarks/gate_drift.py [--images 1000] [--sigmas 0,0.1,0.2,0.3,0.5]
"""
import argparse
import importlib
import pathlib
import re
import sys
import tempfile
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code, not installed

from gatescope.data import fashion_mnist  # noqa: E402
from server_harness import generate_python_stubs, start_server, stop_server  # noqa: E402

STATISTICS = {"dgvit_fmnist": ["gatescope_gate_mean"],
              "darvit_fmnist": ["gatescope_vigilance_crossing"],
              "plug_deit_fmnist": ["gatescope_plug_scale_mean"]}


def scrape(port, name, model):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    pattern = r'^%s_(sum|count)\{layer="(\d+)",model="%s"\} (\S+)$' % (name, model)
    for suffix, layer, value in re.findall(pattern, text, re.M):
        out.setdefault(int(layer), {})[suffix] = float(value)
    return out


def noisy(images, sigma, rng):
    x = images.astype(np.float32) / 255.0
    if sigma > 0:
        x = np.clip(x + rng.normal(0.0, sigma, x.shape).astype(np.float32), 0.0, 1.0)
    return np.round(x * 255.0).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--sigmas", default="0,0.1,0.2,0.3,0.5")
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()
    sigmas = [float(s) for s in args.sigmas.split(",")]
    images, labels = fashion_mnist.load_split("t10k")
    images, labels = images[:args.images], labels[:args.images]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        generate_python_stubs(tmp, "inference/model_config.proto", "inference/grpc_service.proto")
        sys.path.insert(0, str(tmp))
        kv = importlib.import_module("inference.grpc_service_pb2")
        kv_grpc = importlib.import_module("inference.grpc_service_pb2_grpc")
        import grpc
        server = start_server(tmp, ROOT / "model_repository")
        try:
            stub = kv_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(server.address))
            print(f"{args.images} Fashion-MNIST test images per level; noise N(0, sigma^2) on "
                  "[0, 1] pixels, clipped\n")
            for model, names in STATISTICS.items():
                for name in names:
                    rows = []
                    for sigma in sigmas:
                        rng = np.random.default_rng(0)
                        before = scrape(server.metrics_port, name, model)
                        correct = 0
                        for i in range(0, len(images), args.batch):
                            batch = noisy(images[i:i + args.batch], sigma, rng)
                            req = kv.ModelInferRequest(model_name=model)
                            req.inputs.add(name="input", datatype="UINT8",
                                           shape=[len(batch), 28, 28])
                            req.raw_input_contents.append(batch.tobytes())
                            req.outputs.add(name="logits")
                            resp = stub.ModelInfer(req, timeout=120)
                            logits = np.frombuffer(resp.raw_output_contents[0], "<f4")
                            pred = logits.reshape(len(batch), -1).argmax(-1)
                            correct += int((pred == labels[i:i + args.batch]).sum())
                        after = scrape(server.metrics_port, name, model)
                        means = []
                        for layer in sorted(after):
                            b = before.get(layer, {"sum": 0.0, "count": 0.0})
                            n = after[layer]["count"] - b["count"]
                            means.append((after[layer]["sum"] - b["sum"]) / n)
                        rows.append((sigma, correct / len(images), means))
                    layers = len(rows[0][2])
                    print(f"### {model}: `{name}` (per-layer mean over served requests)\n")
                    print("| sigma | accuracy | " +
                          " | ".join(f"layer {l}" for l in range(layers)) + " |")
                    print("| --- | --- | " + " | ".join("---" for _ in range(layers)) + " |")
                    for sigma, acc, means in rows:
                        print(f"| {sigma:g} | {100 * acc:.1f} % | " +
                              " | ".join(f"{m:.4f}" for m in means) + " |")
                    print()
        finally:
            stop_server(server)


if __name__ == "__main__":
    main()
