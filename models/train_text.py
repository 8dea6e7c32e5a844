#!/usr/bin/env python3
"""Trains a text classifier (DGT, vanilla Transformer or Differential Transformer;
gatescope.networks.text) on one corpus of gatescope.data.text_corpora ("wordnet": 26
noun classes, "spam": ham / spam) with the same recipe for every architecture, and scores
it on the corpus's held-out split after every epoch (accuracy and macro-F1; the held-out
split is never trained on and nothing is selected on it: the last epoch is kept).

The corpus's SentencePiece tokenizer (gatescope.text_tokenizer) is trained once on the
training texts and cached in build/train/tokenizer_<corpus>.model (--tokenizer), so the
three architectures of a corpus share it; delete the file to retrain it. Token ids are
truncated to --max-tokens (wordnet 64, spam 128 by default) and the length distribution and
truncated share are recorded. Batches group texts of similar length (padding + mask).

Writes --out (a torch.save dict: state_dict, config, history, tokenizer bytes, command,
seed, threads, train_seconds (the training epochs' wall time; the per-epoch held-out
evaluation is eval_seconds, tokenizer and data loading are in total_seconds), parameters,
corpus sizes, truncation stats, recipe) and
<out without .ckpt>.train.json (the same without weights and tokenizer) for
models/export_text.py.

Usage: /usr/bin/python3 models/train_text.py --corpus wordnet --arch dgt --epochs 3 \\
           --out build/train/dgt_wordnet.ckpt
"""
import argparse
import dataclasses
import hashlib
import json
import math
import os
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from gatescope import ops, paths, text_batching
from gatescope.data import text_corpora
from gatescope.networks.text import TEXT_ARCHS, TextClassifier, TextConfig

# The shipped recipe per corpus (the same for the three architectures), sized so one
# training takes at most ~4 min on one thread of the shared 2-core machine: WordNet has
# 74k short glosses (3 passes), the e-mails are 3k long texts cut to 128 pieces (in a
# trial DGT scored the same held-out accuracy with 256 pieces and 2 epochs as with 128 and
# 4, at twice the serving cost).
CORPUS_DEFAULTS = {
    "wordnet": {"max_tokens": 64, "epochs": 3.0, "batch_size": 64, "warmup_steps": 200},
    "spam": {"max_tokens": 128, "epochs": 4.0, "batch_size": 32, "warmup_steps": 50},
}


def param_groups(model, weight_decay):
    """Weight decay on matrices only (not on biases, norms, embeddings of positions or the
    class token), as the paper's Table 4."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        skip = p.ndim < 2 or "norm" in name or name.endswith("bias") or name in (
            "cls_token", "pos_embed")
        (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def load_tokenizer(corpus, path, train_texts, vocab_size):
    """The cached tokenizer bytes at `path`, or a new one trained on train_texts and cached."""
    from gatescope import text_tokenizer
    path = pathlib.Path(path)
    if path.is_file():
        data = path.read_bytes()
        print(f"tokenizer: reusing {path}", flush=True)
    else:
        t0 = time.time()
        data = text_tokenizer.train_tokenizer(train_texts, vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        print(f"tokenizer: trained for {corpus} in {time.time() - t0:.1f} s -> {path}",
              flush=True)
    return data, text_tokenizer.Tokenizer.from_bytes(data)


def evaluate(model, seqs, labels, pad_id):
    model.eval()
    preds, _ = text_batching.predict(model, seqs, pad_id)
    return text_batching.scores(labels, preds.numpy())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=text_corpora.NAMES, required=True)
    ap.add_argument("--arch", choices=TEXT_ARCHS, required=True)
    ap.add_argument("--epochs", type=float, default=0.0,
                    help="passes over the training texts (0: the corpus default, "
                         "CORPUS_DEFAULTS); a fraction trains the last pass on that share "
                         "of its (shuffled) batches, e.g. 1.5")
    ap.add_argument("--batch-size", type=int, default=0, help="0: the corpus default")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup-steps", type=int, default=-1, help="-1: the corpus default")
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab-size", type=int, default=0,
                    help="tokenizer vocabulary, only used when the cached tokenizer is "
                         "trained (0: gatescope.text_tokenizer.VOCAB_SIZES, 8000)")
    ap.add_argument("--max-tokens", type=int, default=0,
                    help="text pieces kept per text (0: the corpus default, wordnet 64, "
                         "spam 128)")
    ap.add_argument("--tokenizer", default="",
                    help="tokenizer cache (default build/train/tokenizer_<corpus>.model)")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N train texts")
    ap.add_argument("--out", required=True, help="checkpoint path (.ckpt)")
    fixed = ("arch", "vocab_size", "max_tokens", "num_classes", "pad_id")
    tunable = [f for f in dataclasses.fields(TextConfig) if f.name not in fixed]
    for f in tunable:
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    args = ap.parse_args(argv)
    defaults = CORPUS_DEFAULTS[args.corpus]
    args.epochs = args.epochs or defaults["epochs"]
    args.batch_size = args.batch_size or defaults["batch_size"]
    args.max_tokens = args.max_tokens or defaults["max_tokens"]
    if args.warmup_steps < 0:
        args.warmup_steps = defaults["warmup_steps"]

    torch.set_num_threads(args.threads)
    text_batching.keep_freed_memory()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    max_tokens = args.max_tokens
    t_start = time.time()

    data = text_corpora.load(args.corpus)
    train_texts, train_labels = data.train_texts, data.train_labels
    if args.limit:
        train_texts, train_labels = train_texts[:args.limit], train_labels[:args.limit]
    tok_path = args.tokenizer or str(paths.CHECKOUT / "build" / "train"
                                     / f"tokenizer_{args.corpus}.model")
    from gatescope import text_tokenizer
    vocab_size = args.vocab_size or text_tokenizer.VOCAB_SIZES[args.corpus]
    tok_bytes, tokenizer = load_tokenizer(args.corpus, tok_path, data.train_texts, vocab_size)
    vocab = tokenizer.vocab_size
    pad_id = 0
    train_ids, train_full = text_batching.encode_all(tokenizer, train_texts, max_tokens)
    test_ids, test_full = text_batching.encode_all(tokenizer, data.test_texts, max_tokens)
    truncation = {"max_tokens": max_tokens,
                  "train": text_batching.length_stats(train_full, max_tokens),
                  "test": text_batching.length_stats(test_full, max_tokens)}
    print(json.dumps({"truncation": truncation}), flush=True)

    cfg = TextConfig(arch=args.arch, vocab_size=int(vocab), max_tokens=max_tokens,
                     num_classes=len(data.class_names), pad_id=pad_id,
                     **{f.name: getattr(args, f.name) for f in tunable})
    model = TextClassifier(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    eval_fused = ops.available()
    if eval_fused:
        # Held-out evaluation (no gradients) on the exported model's fused kernels; training
        # (gradients on) stays on the eager path (gatescope.attention.fused).
        model.set_fused(True)
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr,
                            betas=(0.9, 0.98), eps=1e-8)
    lengths = [len(s) for s in train_ids]
    if args.epochs <= 0:
        raise SystemExit("--epochs must be > 0")
    steps_per_epoch = math.ceil(len(train_ids) / args.batch_size)
    total = math.ceil(steps_per_epoch * args.epochs)
    labels_t = torch.as_tensor(train_labels, dtype=torch.int64)

    def lr_at(step):
        if step < args.warmup_steps:
            return args.lr * (step + 1) / args.warmup_steps
        frac = (step - args.warmup_steps) / max(1, total - args.warmup_steps)
        return 0.5 * args.lr * (1 + math.cos(math.pi * frac))

    print(f"{args.arch}/{args.corpus}: {n_params} parameters, {len(train_ids)} train / "
          f"{len(test_ids)} held-out texts, {steps_per_epoch} steps/epoch", flush=True)
    step, history = 0, []
    train_seconds = eval_seconds = 0.0
    for epoch in range(math.ceil(args.epochs)):
        model.train()
        t0, loss_sum, seen = time.time(), 0.0, 0
        batches = text_batching.train_batches(lengths, args.batch_size, rng)
        batches = batches[:total - step]  # the last, partial pass of fractional --epochs
        for idx in batches:
            ids, mask = text_batching.pad_batch([train_ids[i] for i in idx], pad_id)
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            logits = model(ids, mask)["logits"]
            loss = F.cross_entropy(logits, labels_t[idx], label_smoothing=args.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            loss_sum += float(loss) * len(idx)
            seen += len(idx)
            step += 1
        dt = time.time() - t0
        train_seconds += dt
        t_eval = time.time()
        s = evaluate(model, test_ids, data.test_labels, pad_id)
        eval_seconds += time.time() - t_eval
        history.append({"epoch": round(min(epoch + 1.0, args.epochs), 3),
                        "steps": step, "train_loss": loss_sum / seen,
                        "test_acc": s["accuracy"], "test_macro_f1": s["macro_f1"],
                        "train_epoch_seconds": dt, "eval_seconds": time.time() - t_eval,
                        "texts_per_s": seen / dt})
        print(json.dumps(history[-1]), flush=True)

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "corpus": args.corpus, "class_names": list(data.class_names),
        "config": dataclasses.asdict(cfg), "parameters": n_params,
        "test_accuracy": history[-1]["test_acc"] if history else None,
        "test_macro_f1": history[-1]["test_macro_f1"] if history else None,
        "history": history, "train_seconds": train_seconds, "eval_seconds": eval_seconds,
        "total_seconds": time.time() - t_start,
        "command": " ".join(["/usr/bin/python3"] + [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
        "train_texts": len(train_ids), "test_texts": len(test_ids),
        "train_class_counts": np.bincount(train_labels, minlength=cfg.num_classes).tolist(),
        "test_class_counts": np.bincount(data.test_labels, minlength=cfg.num_classes).tolist(),
        "truncation": truncation, "threads": args.threads, "seed": args.seed,
        "eval_fused": eval_fused,
        "tokenizer_vocab": int(vocab), "tokenizer_sha256": hashlib.sha256(
            tok_bytes).hexdigest(),
        "recipe": {"optimizer": "AdamW", "betas": [0.9, 0.98], "lr": args.lr,
                   "weight_decay": args.weight_decay, "schedule": "linear warm-up + cosine",
                   "warmup_steps": args.warmup_steps, "batch_size": args.batch_size,
                   "label_smoothing": args.label_smoothing, "grad_clip": 1.0,
                   "epochs": args.epochs,
                   "batches": "length-bucketed: shuffled pools of 50 batches sorted by length"},
    }
    torch.save({"state_dict": model.state_dict(), "tokenizer": tok_bytes, **record}, str(out))
    with open(out.with_suffix(".train.json"), "w") as f:
        json.dump(record, f, indent=2)
    print(f"wrote {out} (train {train_seconds / 60:.2f} min)", flush=True)


if __name__ == "__main__":
    main()
