#!/usr/bin/env python3
"""Robustness to spurious tokens (the DGSA paper's claim for DGT), measured through the
server: every held-out text gets random vocabulary words inserted at 0 / 10 / 20 / 30 %
of its words (at random word boundaries; the words are whole-word pieces of the model's
own tokenizer, drawn uniformly, fixed seed), and each served text model's accuracy, the
drop from clean text, and (DGT) the served per-layer gate means are printed as one
markdown table.

Usage: /usr/bin/python3 benchmarks/bench_text_robustness.py [--corpus wordnet|spam|both]
       [--limit 2000]
"""
import argparse
import pathlib
import random
import struct
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # server_harness: test code
from server_harness import import_api_modules, start_server, stop_server  # noqa: E402

from gatescope.data import text_corpora  # noqa: E402
from gatescope.export.archive import read_metadata  # noqa: E402
from gatescope.text_tokenizer import Tokenizer  # noqa: E402

ARCHS = ("dgt", "transformer", "difftransformer")
RATES = (0.0, 0.1, 0.2, 0.3)
CHUNK = 32  # the shipped text models' max_batch_size


def word_pieces(tok):
    """Whole-word pieces of the vocabulary ("▁word", letters only), as plain words."""
    words = []
    for i in range(tok.vocab_size):
        p = tok.piece(i)
        if p.startswith("\u2581") and len(p) > 2 and p[1:].isalpha():
            words.append(p[1:])
    return words


def corrupt(text, rate, words, rng):
    parts = text.split(" ")
    n = int(round(rate * len(parts)))
    for _ in range(n):
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(words))
    return " ".join(parts)


def infer(kv, stub, model, texts, outputs):
    req = kv.ModelInferRequest(model_name=model)
    req.inputs.add(name="text", datatype="BYTES", shape=[len(texts)])
    for o in outputs:
        req.outputs.add(name=o)
    req.raw_input_contents.append(
        b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts))
    resp = stub.ModelInfer(req, timeout=600)
    out = {}
    for i, o in enumerate(resp.outputs):
        out[o.name] = np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(tuple(o.shape))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="both", choices=("wordnet", "spam", "both"))
    ap.add_argument("--limit", type=int, default=2000, help="held-out texts per corpus")
    args = ap.parse_args()
    corpora = ("wordnet", "spam") if args.corpus == "both" else (args.corpus,)
    import grpc
    tmp = pathlib.Path(__import__("tempfile").mkdtemp())
    for sub in ("stubs", "server"):
        (tmp / sub).mkdir()
    kv, kv_grpc, _, _ = import_api_modules(tmp / "stubs")
    server = start_server(tmp / "server", ROOT / "model_repository")
    channel = grpc.insecure_channel(server.address, options=[
        ("grpc.max_receive_message_length", 1 << 30), ("grpc.max_send_message_length", 1 << 30)])
    stub = kv_grpc.GRPCInferenceServiceStub(channel)
    print("| corpus | model | " + " | ".join(f"acc @{int(100 * r)} %" for r in RATES) +
          " | drop @30 % | gate mean per layer @0 % → @30 % |")
    print("| --- | --- | " + " | ".join("---" for _ in RATES) + " | --- | --- |")
    try:
        for corpus in corpora:
            splits = text_corpora.load(corpus)
            # Texts the server takes (a few e-mails exceed max_text_bytes even before the
            # insertions; the insertions add at most 30 % of the words).
            keep = [i for i, t in enumerate(splits.test_texts)
                    if len(t.encode()) * 1.5 <= 65536][:args.limit]
            texts = [splits.test_texts[i] for i in keep]
            labels = np.asarray([splits.test_labels[i] for i in keep])
            for arch in ARCHS:
                model = f"{arch}_{corpus}"
                path = ROOT / "model_repository" / model / "1" / "model.pt"
                meta = read_metadata(path)
                tok = Tokenizer.from_archive(path, meta)
                words = word_pieces(tok)
                outputs = list(meta["outputs"])
                accs, gates = [], []
                for rate in RATES:
                    rng = random.Random(1234)  # the same insertions for every model
                    noisy = [corrupt(t, rate, words, rng) for t in texts]
                    logits, gate = [], []
                    for at in range(0, len(noisy), CHUNK):
                        out = infer(kv, stub, model, noisy[at:at + CHUNK], outputs)
                        logits.append(out["logits"])
                        if "gate_mean" in out:
                            gate.append(out["gate_mean"])
                    pred = np.concatenate(logits).argmax(-1)
                    accs.append(float((pred == labels).mean()))
                    gates.append(np.concatenate(gate).mean(0) if gate else None)
                gate_text = ("—" if gates[0] is None else
                             " ".join(f"{a:.3f}→{b:.3f}" for a, b in zip(gates[0], gates[-1])))
                print(f"| {corpus} | {model} | " + " | ".join(f"{100 * a:.2f}" for a in accs) +
                      f" | {100 * (accs[0] - accs[-1]):.2f} pt | {gate_text} |", flush=True)
    finally:
        channel.close()
        stop_server(server)


if __name__ == "__main__":
    main()
