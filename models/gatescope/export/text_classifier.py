"""Exports a trained text classifier (models/train_text.py) as a served model.

Writes <repo>/<name>/<version>/model.pt: the TorchScript of gatescope.networks.text with
every attention on the fused ops, and the extra files `gatescope.json` (task
"text_classification"; the server's contract, checked against gatescope.v1.ModelConfig),
`training.json` (the training record plus the exported model's held-out scores) and
`tokenizer.model` (the SentencePiece model proto, raw bytes, the one the model was trained
with: the server tokenizes with it). Also <repo>/<name>/config.pbtxt (serving settings) and
<repo>/<name>/README.md (the model card: data and split, tokenizer, config, training,
held-out accuracy and macro-F1 per epoch, the TF-IDF + logistic-regression baseline of
models/checkpoints/text_baselines.json, the serving metadata).

The card's headline held-out numbers are those of the exported TorchScript itself (fused
ops, length-bucketed padded batches, gatescope.text_batching), which
models/tests/test_text_models.py recomputes from the shipped archive.

--ckpt takes a training checkpoint (.ckpt) or an exported model.pt (its weights,
training.json and tokenizer.model), so a shipped model can be re-exported without
retraining.

Usage: /usr/bin/python3 models/export_text.py --ckpt build/train/dgt_wordnet.ckpt \\
           --name dgt_wordnet
"""
import argparse
import json
import pathlib
from typing import Any, Dict

import torch

from gatescope import ops, paths, text_batching
from gatescope.export.archive import TRAINING_FILE, save_model
from gatescope.networks.text import TextClassifier, TextConfig

TOKENIZER_FILE = "tokenizer.model"
MAX_BATCH_SIZE = 32
MAX_TEXT_BYTES = 65536
QUEUE_DELAY_US = 500
BASELINES = paths.CHECKOUT / "models" / "checkpoints" / "text_baselines.json"
ARCH_TITLES = {"dgt": "DGT (Differential Gated Transformer, M-DGSA)",
               "transformer": "Transformer (softmax multi-head self-attention)",
               "difftransformer": "Differential Transformer (DiffAttn)"}
SPLIT_NOTES = {
    "wordnet": "The split is fixed by each synset's offset (a hash), not by a seed.",
    "spam": "The split follows the corpus's own groups: easy-ham-1, hard-ham-1 and spam-1 "
            "train, easy-ham-2 and spam-2 are held out (all hard ham is training data; the "
            "held-out groups are separate collections, so the splits are not identically "
            "distributed).",
}
CORPUS_TITLES = {"wordnet": "the WordNet 3.0 noun glosses (26 lexicographer classes)",
                 "spam": "the SpamAssassin public corpus e-mails (ham / spam)"}


def map_kinds(cfg: TextConfig):
    return ["attention", "gate"] if cfg.arch == "dgt" else ["attention"]


def output_names(cfg: TextConfig):
    return ["logits", "gate_mean"] if cfg.arch == "dgt" else ["logits"]


def metadata_for(name: str, cfg: TextConfig, class_names) -> Dict[str, Any]:
    return {
        "name": name,
        "task": "text_classification",
        "arch": cfg.arch,
        "labels": list(class_names),
        "outputs": output_names(cfg),
        "cls_token": True,
        "maps": map_kinds(cfg),
        "required_ops": ["gatescope"],
        "max_batch_size": MAX_BATCH_SIZE,
        "layers": cfg.depth,
        "heads": cfg.heads,
        "text": {"tokenizer": "sentencepiece", "tokenizer_file": TOKENIZER_FILE,
                 "max_tokens": cfg.max_tokens, "overflow": "truncate",
                 "max_text_bytes": MAX_TEXT_BYTES, "pad_id": cfg.pad_id},
    }


def read_checkpoint(path) -> Dict[str, Any]:
    """A training record with "state_dict", "tokenizer" (bytes), "config", "history", ...
    from a .ckpt or an exported model.pt."""
    path = str(path)
    if path.endswith(".ckpt"):
        return torch.load(path, map_location="cpu")
    extra = {TRAINING_FILE: "", TOKENIZER_FILE: ""}
    module = torch.jit.load(path, map_location="cpu", _extra_files=extra)
    if not extra[TRAINING_FILE] or not extra[TOKENIZER_FILE]:
        raise ValueError(f"{path} carries no {TRAINING_FILE} or {TOKENIZER_FILE}")
    record = json.loads(extra[TRAINING_FILE])
    record["state_dict"] = module.state_dict()
    record["tokenizer"] = bytes(extra[TOKENIZER_FILE])
    return record


def load_model(ckpt):
    cfg = TextConfig(**ckpt["config"])
    model = TextClassifier(cfg)
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, cfg


def held_out_scores(model, tokenizer_bytes: bytes, corpus: str, max_tokens: int,
                    pad_id: int = 0) -> Dict[str, float]:
    """Accuracy and macro-F1 of `model` (eager or TorchScript) on the corpus's held-out
    split, tokenized with `tokenizer_bytes` and truncated to max_tokens."""
    from gatescope import text_tokenizer
    from gatescope.data import text_corpora
    data = text_corpora.load(corpus)
    tok = text_tokenizer.Tokenizer.from_bytes(tokenizer_bytes)
    seqs, _ = text_batching.encode_all(tok, data.test_texts, max_tokens)
    preds, _ = text_batching.predict(model, seqs, pad_id)
    out = text_batching.scores(data.test_labels, preds.numpy())
    out["texts"] = len(seqs)
    train = set(data.train_texts)
    out["texts_also_in_training"] = sum(t in train for t in data.test_texts)
    return out


def export(ckpt_path, name, repo, version="1"):
    ops.load()
    ckpt = read_checkpoint(ckpt_path)
    model, cfg = load_model(ckpt)
    model.set_fused(True)
    scripted = torch.jit.script(model)
    meta = metadata_for(name, cfg, ckpt["class_names"])
    record = {k: v for k, v in ckpt.items() if k not in ("state_dict", "tokenizer", "held_out")}
    scores = held_out_scores(scripted, ckpt["tokenizer"], ckpt["corpus"], cfg.max_tokens,
                             cfg.pad_id)
    record["held_out"] = {**scores, "evaluated": "the exported TorchScript (fused ops), "
                          "length-bucketed padded batches"}
    path = save_model(scripted, repo, name, version, meta, record,
                      extra_files={TOKENIZER_FILE: ckpt["tokenizer"]})
    return path, meta, record


def write_config_pbtxt(repo, name):
    text = (f"max_batch_size: {MAX_BATCH_SIZE}\n"
            "dynamic_batching {\n"
            f"  max_queue_delay_microseconds: {QUEUE_DELAY_US}\n"
            "}\n")
    (pathlib.Path(repo) / name / "config.pbtxt").write_text(text)


def load_baselines(path=BASELINES):
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (the TF-IDF baselines the cards compare "
                                "with)")
    return json.loads(path.read_text())


def baseline_row(baselines, corpus):
    """(accuracy, macro-F1, entry) of the corpus's TF-IDF + logistic regression
    (models/text_baseline.py writes {corpus: {"accuracy", "macro_f1", "method", ...}})."""
    entry = baselines[corpus]
    return float(entry["accuracy"]), float(entry["macro_f1"]), entry


def pct(x):
    return f"{100 * x:.2f} %"


def write_card(repo, name, meta, record, baselines=None):
    cfg = record["config"]
    hist = record["history"]
    held = record["held_out"]
    corpus = record["corpus"]
    trunc = record["truncation"]
    recipe = record["recipe"]
    classes = record["class_names"]
    if baselines is None:
        baselines = load_baselines()
    b_acc, b_f1, b_entry = baseline_row(baselines, corpus)
    b_desc = b_entry.get("method", "TF-IDF + logistic regression")

    def trunc_line(split):
        s = trunc[split]
        return (f"| {split} | {s['count']} | {s['mean']:.1f} | {s['p50']:.0f} | {s['p90']:.0f} "
                f"| {s['p99']:.0f} | {s['max']} | {100 * s['truncated_fraction']:.2f} % "
                f"| {100 * s['pieces_kept_fraction']:.1f} % |")

    counts = " / ".join(f"{c} {n}" for c, n in zip(classes, record["test_class_counts"])) \
        if len(classes) <= 4 else f"{len(classes)} classes"
    lines = [
        f"# {name}", "",
        f"{ARCH_TITLES[cfg['arch']]} text classifier for {CORPUS_TITLES[corpus]}, trained "
        "from scratch with the same size and recipe as its two siblings (`dgt_<corpus>`, "
        "`transformer_<corpus>`, `difftransformer_<corpus>`); only the attention differs.",
        "",
        "## Data and split",
        f"- Corpus `{corpus}` (gatescope.data.text_corpora, which documents the source and the "
        f"fixed split): {record['train_texts']} training texts, {record['test_texts']} "
        f"held-out texts ({counts}); the held-out examples were never trained on (neither by the "
        "model nor by the tokenizer) and nothing was selected on them: the last epoch is "
        "shipped. " + SPLIT_NOTES[corpus]
        + (f" {held['texts_also_in_training']} held-out texts also occur word for word in "
           "the training split (the corpus repeats some texts)."
           if held.get("texts_also_in_training") else ""),
        f"- Classes: {', '.join(classes)}.", "",
        "## Tokenizer",
        f"- SentencePiece unigram model with byte fallback (gatescope.text_tokenizer), "
        f"{record['tokenizer_vocab']} pieces, trained on the training texts only; pad id "
        f"{cfg['pad_id']}, unk id 1, no BOS/EOS. Stored in the archive as `{TOKENIZER_FILE}` "
        f"(sha256 {record['tokenizer_sha256'][:16]}...), the server tokenizes with it.",
        f"- Texts are cut to their first {trunc['max_tokens']} pieces (the class token is "
        "extra). Pieces per text before the cut:", "",
        "| split | texts | mean | median | p90 | p99 | max | truncated | pieces kept |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        trunc_line("train"), trunc_line("test"), "",
        "## Config",
        "| key | value |", "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in cfg.items()],
        f"| parameters | {record['parameters']} |", "",
        "Pre-norm encoder: token embedding + a learned class token (position 0) + learned "
        "positions, blocks of attention and a SwiGLU feed-forward (hidden = mlp_ratio x dim), "
        "final LayerNorm, linear head on the class token."
        + (" M-DGSA without the [Q+;Q-] residual (the paper's DGT)."
           if cfg["arch"] == "dgt" else ""), "",
        "## Training",
        f"- Command: `{record['command']}` (`scripts/train_text_models.sh` retrains and "
        "re-exports the six text models)",
        f"- {recipe['epochs']:g} epochs, {recipe['optimizer']} (betas {recipe['betas']}, weight "
        f"decay {recipe['weight_decay']} on matrices), lr {recipe['lr']} with "
        f"{recipe['warmup_steps']} warm-up steps then cosine decay, batch "
        f"{recipe['batch_size']} ({recipe['batches']}), label smoothing "
        f"{recipe['label_smoothing']}, gradient clipping {recipe['grad_clip']}, seed "
        f"{record['seed']}, {record['threads']} CPU thread(s).",
        f"- Training time: {record['train_seconds'] / 60:.2f} min for the epochs (plus "
        f"{record['eval_seconds'] / 60:.2f} min of per-epoch held-out evaluation) on a "
        "shared 2-core CPU machine.", "",
        "## Result",
        f"- Held-out accuracy ({held['texts']} texts, the exported model): "
        f"**{100 * held['accuracy']:.2f} %**",
        f"- Held-out macro-F1: **{100 * held['macro_f1']:.2f} %**", "",
        "| epoch | train loss | held-out accuracy | held-out macro-F1 |",
        "| --- | --- | --- | --- |",
        *[f"| {h['epoch']:g} | {h['train_loss']:.4f} | {pct(h['test_acc'])} "
          f"| {pct(h['test_macro_f1'])} |" for h in hist], "",
        "The per-epoch numbers were measured during training ("
        + ("fused attention kernels" if record.get("eval_fused") else "eager attention")
        + "); the headline ones are the exported TorchScript's (fused kernels), which "
        "models/tests/test_text_models.py recomputes from the archive.", "",
        "## This model vs TF-IDF + logistic regression",
        "Same split; the baseline is models/checkpoints/text_baselines.json "
        f"({b_desc}).", "",
        "| model | held-out accuracy | held-out macro-F1 |", "| --- | --- | --- |",
        f"| {name} | {pct(held['accuracy'])} | {pct(held['macro_f1'])} |",
        f"| TF-IDF + logistic regression | {pct(b_acc)} | {pct(b_f1)} |", "",
        "## Serving metadata (`gatescope.json` inside model.pt)", "```json",
        json.dumps(meta, indent=2), "```", "",
    ]
    (pathlib.Path(repo) / name / "README.md").write_text("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--repo", default=str(paths.CHECKOUT / "model_repository"))
    ap.add_argument("--version", default="1")
    args = ap.parse_args(argv)
    path, meta, record = export(args.ckpt, args.name, args.repo, args.version)
    write_config_pbtxt(args.repo, args.name)
    write_card(args.repo, args.name, meta, record)
    held = record["held_out"]
    print(f"wrote {path} ({path.stat().st_size} bytes): held-out accuracy "
          f"{pct(held['accuracy'])}, macro-F1 {pct(held['macro_f1'])}")
