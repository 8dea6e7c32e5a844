"""Text classifiers (gatescope.networks.text): key masks, padded batches, fused vs eager,
explain maps, the TorchScript archive with its tokenizer, and the shipped models' cards."""
import json
import pathlib
import random
import re
import time

import numpy as np
import pytest
import torch

from gatescope.attention import MultiheadDGSA, MultiheadDiffAttn, MultiheadSelfAttention
from gatescope.attention.dar import DarParams
from gatescope.attention.dgsa import mix
from gatescope.attention.softmax_maps import softmax_map
from gatescope.networks.text import TEXT_ARCHS, TextClassifier, TextConfig
from gatescope import text_batching

REPO = pathlib.Path(__file__).resolve().parents[2] / "model_repository"
SHIPPED = [f"{arch}_{corpus}" for corpus in ("wordnet", "spam") for arch in TEXT_ARCHS]
LENGTHS = [1, 20, 7, 13, 2, 20, 5, 16, 9, 11, 3, 18, 4, 14, 6, 19, 8, 10, 12, 15, 17]


def tiny(arch, **kw):
    torch.manual_seed(0)
    cfg = TextConfig(arch=arch, vocab_size=97, max_tokens=24, dim=16, depth=2, heads=2,
                     dropout=0.0, num_classes=5, **kw)
    model = TextClassifier(cfg).eval()
    with torch.no_grad():  # away from the initialisation, so the checks see real mixing
        g = torch.Generator().manual_seed(1)
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model, cfg


def random_seqs(lengths, vocab=97, seed=0):
    rng = random.Random(seed)
    return [[rng.randrange(1, vocab) for _ in range(n)] for n in lengths]


def padded(seqs, garbage=True):
    """pad_batch, with random ids (not pad_id) at the padded places: they must not matter."""
    ids, mask = text_batching.pad_batch(seqs, 0)
    if garbage:
        g = torch.Generator().manual_seed(3)
        ids = torch.where(mask, ids, torch.randint(1, 97, ids.shape, generator=g))
    return ids, mask


def ops_called(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    return result, {e.key for e in prof.key_averages() if e.key.startswith("gatescope::")}


# --- attention modules with a key mask -------------------------------------------------

MODULES = {
    "dgsa": lambda dar: MultiheadDGSA(16, 2, 0.8, qk_residual=False, dar=dar),
    "dgsa_residual": lambda dar: MultiheadDGSA(16, 2, 0.8, qk_residual=True, dar=dar),
    "mhsa": lambda dar: MultiheadSelfAttention(16, 2, dar=dar),
    "diff": lambda dar: MultiheadDiffAttn(16, 2, 1, dar=dar),
}


@pytest.mark.parametrize("dar", [False, True], ids=["plain", "dar"])
@pytest.mark.parametrize("name", sorted(MODULES))
def test_attention_key_mask(ops, name, dar):
    """Masked keys get weight 0 (eager maps), a padded batch equals each example alone, and
    the fused kernels with the mask equal the eager path; statistics included."""
    torch.manual_seed(0)
    m = MODULES[name](DarParams(lam=0.4) if dar else None).eval()
    lengths = [1, 6, 3, 9]
    x = torch.randn(len(lengths), 9, 16)
    mask = torch.arange(9)[None, :] < torch.tensor(lengths)[:, None]
    with torch.no_grad():
        _, maps = m.forward_with_maps(x, mask)
        assert torch.all(maps["attention"].masked_select(~mask[:, None, None, :]) == 0)
        eager, eager_stats = m(x, mask)
        for i, n in enumerate(lengths):
            one, one_stats = m(x[i:i + 1, :n])
            assert torch.allclose(eager[i, :n], one[0], atol=1e-5)
            if "gate_mean" in one_stats:
                assert torch.allclose(eager_stats["gate_mean"][i], one_stats["gate_mean"][0],
                                      atol=1e-6)
        m.use_fused = True
        fused, fused_stats = m(x, mask)
    # padded query rows are not compared: they are never read by the text models
    for i, n in enumerate(lengths):
        assert torch.allclose(fused[i, :n], eager[i, :n], atol=1e-5)
    assert set(fused_stats) == set(eager_stats)
    for k in eager_stats:
        assert torch.allclose(fused_stats[k], eager_stats[k], atol=1e-5), k


def test_softmax_map_without_mask_is_unchanged():
    torch.manual_seed(0)
    q, k = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    a, _, _ = softmax_map(q, k, False, 0.0, 0.0, 1.0, 0.0, 1)
    assert torch.equal(a, torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1))


# --- the classifiers ---------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["eager", "fused", "scripted"])
@pytest.mark.parametrize("arch", TEXT_ARCHS)
def test_padded_batch_equals_unbatched(ops, arch, mode):
    model, cfg = tiny(arch)
    if mode != "eager":
        model.set_fused(True)
    if mode == "scripted":
        model = torch.jit.script(model)
    seqs = random_seqs(LENGTHS)
    ids, mask = padded(seqs)
    with torch.no_grad():
        out = model(ids, mask)
        assert out["logits"].shape == (len(seqs), cfg.num_classes)
        assert sorted(out) == (["gate_mean", "logits"] if arch == "dgt" else ["logits"])
        for i, s in enumerate(seqs):
            one = model(torch.tensor([s]), torch.ones(1, len(s), dtype=torch.bool))
            for k in out:
                assert torch.allclose(out[k][i], one[k][0], atol=1e-5), (k, i, len(s))
    if arch == "dgt":
        assert out["gate_mean"].shape == (len(seqs), cfg.depth)
        assert ((out["gate_mean"] > 0) & (out["gate_mean"] < 1)).all()


@pytest.mark.parametrize("arch", TEXT_ARCHS)
def test_fused_equals_eager(ops, arch):
    model, _ = tiny(arch)
    ids, mask = padded(random_seqs(LENGTHS, seed=5))
    with torch.no_grad():
        eager, eager_ops = ops_called(lambda: model(ids, mask))
        model.set_fused(True)
        fused, fused_ops = ops_called(lambda: model(ids, mask))
    assert eager_ops == set()
    assert fused_ops == {"gatescope::dgsa_attention" if arch == "dgt"
                         else "gatescope::dar_attention"}
    for k in eager:
        assert torch.allclose(fused[k], eager[k], atol=1e-5), k


def test_empty_and_all_padding_rows(ops):
    """T = 0 (only the class token) and an example that is all padding are valid inputs."""
    model, _ = tiny("dgt")
    model.set_fused(True)
    with torch.no_grad():
        empty = model(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(2, 0, dtype=torch.bool))
        ids, mask = padded([[5, 6, 7], []])
        both = model(ids, mask)
    assert torch.allclose(both["logits"][1], empty["logits"][0], atol=1e-5)
    assert torch.isfinite(both["logits"]).all()


def test_too_many_tokens_and_shape_mismatch_raise():
    model, cfg = tiny("transformer")
    ids = torch.ones(1, cfg.max_tokens + 1, dtype=torch.int64)
    with pytest.raises(Exception, match="max_tokens"):
        model(ids, torch.ones_like(ids, dtype=torch.bool))
    with pytest.raises(Exception, match="shape"):
        model(ids[:, :3], torch.ones(1, 4, dtype=torch.bool))


def test_same_size_for_the_three_archs():
    cfg = dict(vocab_size=8000, max_tokens=64, num_classes=26)
    sizes = {a: sum(p.numel() for p in TextClassifier(TextConfig(arch=a, **cfg)).parameters())
             for a in TEXT_ARCHS}
    assert max(sizes.values()) / min(sizes.values()) < 1.01, sizes


@pytest.mark.parametrize("arch", TEXT_ARCHS)
def test_explain_maps(arch):
    model, cfg = tiny(arch)
    s = random_seqs([11])[0]
    ids = torch.tensor([s])
    n = len(s) + 1
    with torch.no_grad():
        maps = model.explain(ids)
        logits = model(ids, torch.ones_like(ids, dtype=torch.bool))["logits"]
        t = model.explain_begin(ids)
        assert t.shape == (1, n, cfg.dim)
        for layer in range(cfg.depth):
            blk = model.blocks[layer]
            h = blk.norm1(t)
            t, one = model.explain_layer(t, layer)
            assert sorted(one) == (["attention", "gate"] if arch == "dgt" else ["attention"])
            a = one["attention"]
            assert a.shape == (1, cfg.heads, n, n)
            for kind in one:
                assert torch.equal(one[kind], maps[kind][layer])
            attn = blk.attn
            if arch == "transformer":
                assert torch.allclose(a.sum(-1), torch.ones(1, cfg.heads, n), atol=1e-5)
                assert (a >= 0).all()
            elif arch == "difftransformer":
                assert torch.allclose(a.sum(-1), (1 - attn.lam()).expand(1, cfg.heads, n),
                                      atol=1e-5)
            else:
                assert one["gate"].shape == (1, cfg.heads, n)
                q_pos, k_pos, q_neg, k_neg, _, gate, _ = attn._streams(h)
                a_pos = torch.softmax(q_pos @ k_pos.transpose(-1, -2) / attn.head_dim ** 0.5, -1)
                a_neg = torch.softmax(q_neg @ k_neg.transpose(-1, -2) / attn.head_dim ** 0.5, -1)
                g = gate.unsqueeze(-1)
                assert torch.allclose(one["gate"], gate, atol=1e-6)
                assert torch.allclose(a, g * a_pos - (1 - g) * a_neg, atol=1e-6)
                assert torch.allclose(a, mix(a_pos, a_neg, gate), atol=1e-6)
        end = model.explain_end(t)["logits"]
    assert torch.allclose(end, logits, atol=1e-5)
    assert torch.allclose(maps["logits"][0], logits, atol=1e-5)


# --- the archive ----------------------------------------------------------------------------

def tiny_tokenizer_bytes():
    from gatescope import text_tokenizer
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "spam", "offer", "meeting", "noun", "gloss",
             "tree", "animal", "river", "money", "free", "click", "here", "report", "project"]
    texts = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(300)]
    return text_tokenizer.train_tokenizer(texts, 290)


@pytest.mark.parametrize("arch", TEXT_ARCHS)
def test_archive_round_trip_with_tokenizer(ops, tmp_path, arch):
    from gatescope import text_tokenizer
    from gatescope.export.archive import read_extra_bytes, read_metadata, save_model
    from gatescope.export.text_classifier import TOKENIZER_FILE, metadata_for
    from gatescope.model_config import METADATA_FILE, parse
    tok_bytes = tiny_tokenizer_bytes()
    assert b"\x00" in tok_bytes  # binary: must come back byte for byte
    model, cfg = tiny(arch)
    labels = [f"c{i}" for i in range(cfg.num_classes)]
    seqs = [s[:cfg.max_tokens] for s in random_seqs([3, 17, 9], vocab=cfg.vocab_size)]
    ids, mask = padded(seqs)
    with torch.no_grad():
        eager = model(ids, mask)
        eager_maps = model.explain(ids[:1, :3])
    model.set_fused(True)
    meta = metadata_for("m", cfg, labels)
    path = save_model(torch.jit.script(model), tmp_path, "m", "1", meta, {"config": "x"},
                      extra_files={TOKENIZER_FILE: tok_bytes})
    extra = {METADATA_FILE: "", TOKENIZER_FILE: ""}
    loaded = torch.jit.load(str(path), _extra_files=extra)
    assert extra[TOKENIZER_FILE] == tok_bytes
    assert read_extra_bytes(path, TOKENIZER_FILE) == tok_bytes
    assert json.loads(extra[METADATA_FILE]) == meta == read_metadata(path)
    tok = text_tokenizer.Tokenizer.from_bytes(extra[TOKENIZER_FILE])
    assert tok.encode("free money") == text_tokenizer.Tokenizer.from_bytes(tok_bytes).encode(
        "free money")
    # the metadata parses as gatescope.v1.ModelConfig, text settings included
    msg = parse(json.dumps(meta))
    assert msg.task == "text_classification" and msg.text.tokenizer_file == TOKENIZER_FILE
    assert msg.text.max_tokens == cfg.max_tokens and msg.text.overflow == "truncate"
    assert list(msg.maps) == (["attention", "gate"] if arch == "dgt" else ["attention"])
    assert not msg.HasField("input") and len(msg.token_grid) == 0 and msg.cls_token
    with torch.no_grad():
        out = loaded(ids, mask)
        maps = loaded.explain(ids[:1, :3])
    assert sorted(out) == sorted(meta["outputs"])
    for k in out:
        assert torch.allclose(out[k], eager[k], atol=1e-5)
    assert set(maps) == set(meta["maps"]) | {"logits"}
    for kind in meta["maps"]:
        assert len(maps[kind]) == cfg.depth
        for a, b in zip(maps[kind], eager_maps[kind]):
            assert torch.allclose(a, b, atol=1e-6)
    op = "dgsa_attention" if arch == "dgt" else "dar_attention"
    assert f"gatescope::{op}" in str(loaded.inlined_graph)


def test_save_model_refuses_reserved_or_text_extra_files(tmp_path):
    from gatescope.export.archive import save_model
    from gatescope.export.text_classifier import metadata_for
    model, cfg = tiny("transformer")
    scripted = torch.jit.script(model)
    meta = metadata_for("m", cfg, [f"c{i}" for i in range(cfg.num_classes)])
    for bad in ({"gatescope.json": b"{}"}, {"a/b": b"x"}, {"t.model": "text"}):
        with pytest.raises(ValueError):
            save_model(scripted, tmp_path, "m", "1", meta, {}, extra_files=bad)
    assert not (tmp_path / "m" / "1" / "model.pt").exists()


def test_metadata_validates_for_every_arch():
    from gatescope.export.text_classifier import metadata_for
    from gatescope.model_config import InvalidModelConfig, metadata_json
    for arch in TEXT_ARCHS:
        cfg = TextConfig(arch=arch, vocab_size=8000, max_tokens=64, num_classes=2)
        meta = metadata_for(f"{arch}_x", cfg, ["ham", "spam"])
        metadata_json(meta)
        assert meta["text"] == {"tokenizer": "sentencepiece", "tokenizer_file": "tokenizer.model",
                                "max_tokens": 64, "overflow": "truncate",
                                "max_text_bytes": 65536, "pad_id": 0}
        assert meta["outputs"] == (["logits", "gate_mean"] if arch == "dgt" else ["logits"])
        with pytest.raises(InvalidModelConfig):
            metadata_json({**meta, "text": {**meta["text"], "tokeniser": "x"}})


def test_batching_helpers():
    ids, mask = text_batching.pad_batch([[4, 5], [], [7]], pad_id=0)
    assert ids.tolist() == [[4, 5], [0, 0], [7, 0]]
    assert mask.tolist() == [[True, True], [False, False], [True, False]]
    lengths = [random.Random(i).randrange(1, 60) for i in range(1000)]
    batches = text_batching.train_batches(lengths, 32, np.random.default_rng(0))
    assert sorted(i for b in batches for i in b) == list(range(1000))
    eval_b = text_batching.eval_batches(lengths, max_pieces=512)
    assert sorted(i for b in eval_b for i in b) == list(range(1000))
    assert all(len(b) * max(lengths[i] for i in b) <= 512 or len(b) == 1 for b in eval_b)
    stats = text_batching.length_stats([1, 5, 10, 100], 10)
    assert stats["truncated"] == 1 and stats["truncated_fraction"] == 0.25


# --- the shipped models ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpora():
    from gatescope.data import text_corpora
    # Large freed tensors stay with the allocator instead of being faulted in again (the
    # page faults cost more than the attention here); see keep_freed_memory.
    text_batching.keep_freed_memory()
    return {name: text_corpora.load(name) for name in ("wordnet", "spam")}


@pytest.fixture(scope="module")
def encoded():
    """Held-out token ids per (corpus, tokenizer bytes, max_tokens): the three models of a
    corpus share their tokenizer, so each corpus is tokenized once."""
    return {}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_model_matches_its_card(ops, corpora, encoded, name):
    """Held-out accuracy and macro-F1 recomputed from the shipped archive alone (weights,
    tokenizer, metadata) equal the card's, within 0.1 %."""
    from gatescope import text_tokenizer
    t0 = time.time()
    path = REPO / name / "1" / "model.pt"
    assert path.is_file(), f"{path} missing: run scripts/train_text_models.sh"
    assert path.stat().st_size < 10 * 2**20
    extra = {"gatescope.json": "", "tokenizer.model": "", "training.json": ""}
    model = torch.jit.load(str(path), _extra_files=extra)
    meta = json.loads(extra["gatescope.json"])
    record = json.loads(extra["training.json"])
    arch, corpus = name.split("_")
    data = corpora[corpus]
    assert meta["task"] == "text_classification" and meta["arch"] == arch
    assert meta["labels"] == data.class_names and record["corpus"] == corpus
    assert meta["text"]["tokenizer_file"] == "tokenizer.model"
    # The exporter's serving config, then measured by the tune tool (its header says so).
    assert (REPO / name / "config.pbtxt").read_text().startswith(
        "# Written by scripts/gatescope_tune.py")
    key = (corpus, bytes(extra["tokenizer.model"]), meta["text"]["max_tokens"])
    if key not in encoded:
        tok = text_tokenizer.Tokenizer.from_bytes(extra["tokenizer.model"])
        encoded[key] = text_batching.encode_all(tok, data.test_texts, key[2])[0]
    seqs = encoded[key]
    preds, _ = text_batching.predict(model, seqs, meta["text"]["pad_id"])
    got = text_batching.scores(data.test_labels, preds.numpy())
    card = (REPO / name / "README.md").read_text()
    acc = float(re.search(r"Held-out accuracy .*?\*\*([0-9.]+) %\*\*", card).group(1)) / 100
    f1 = float(re.search(r"Held-out macro-F1: \*\*([0-9.]+) %\*\*", card).group(1)) / 100
    assert abs(got["accuracy"] - acc) <= 0.001, (got, acc)
    assert abs(got["macro_f1"] - f1) <= 0.001, (got, f1)
    assert time.time() - t0 < 20
