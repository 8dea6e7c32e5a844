"""Text models served (task text_classification): the server's tokenizer gives the Python
tokenizer's ids and offsets on every held-out text and on unicode, emoji, empty and very
long texts; served logits equal the Python model's run one text at a time, for concurrent
mixed-length traffic through both APIs; explanations over tokens equal the Python
reference; truncation follows the model's metadata; bad text is refused and the server
keeps serving; gatescope-perf drives a text model with text files through both APIs; the
DGT models' served gate means match their cards' monitoring references, which the server
exports."""
import json
import concurrent.futures
import struct
import subprocess

import grpc
import numpy as np
import pytest
import torch

from server_harness import REPO, api_stubs, metric_value, serve_shipped
from gatescope import explain as ref
from gatescope import ops
from gatescope.data import text_corpora
from gatescope.export.archive import read_metadata
from gatescope.export.monitoring_reference import read_reference
from gatescope.text_tokenizer import Tokenizer

WORDNET = ("dgt_wordnet", "transformer_wordnet", "difftransformer_wordnet")
SPAM = "dgt_spam"
TOKENIZE = REPO / "build" / "tests" / "tokenize_texts"
SPECIAL = ["", "   ", "Ünïcödé façade — naïve café", "中文文本分类 测试", "Привет, мир!",
           "emoji 👍🏽 and a family 👨‍👩‍👧‍👦 🇩🇪", "tab\tnew\nline\r\n", "a" * 100_000,
           ("long words " * 20_000).strip(), "\u200b zero width \ufeff bom", "x" * 1 + "ﬁ ligature ①"]


def archive(name):
    return REPO / "model_repository" / name / "1" / "model.pt"


def tokenizer_of(name):
    meta = read_metadata(archive(name))
    return Tokenizer.from_archive(archive(name), meta), meta


def load(name):
    ops.load()
    return torch.jit.load(str(archive(name)))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # Whether concurrent texts share calls (test_mixed_length_batches_equal_each_text_alone)
    # is decided by the shipped delays (200-700 us): waiting them out makes it certain
    # whatever the client's pace; early release runs a batch once arrivals look sparse.
    yield from serve_shipped(tmp_path_factory, WORDNET + (SPAM,), ["--early_batch_release=false"])


@pytest.fixture(scope="module")
def stubs(server, tmp_path_factory):
    yield from api_stubs(server, tmp_path_factory)


@pytest.fixture(scope="module")
def wordnet():
    return text_corpora.load("wordnet")


@pytest.fixture(scope="module")
def spam():
    return text_corpora.load("spam")


def server_tokens(model_file, texts, max_tokens, tmp_path):
    """The server's TextTokenizer over `texts`: whether it encodes words alone (long texts
    only as far as they are read), and per text (pieces read, truncated, bytes encoded,
    [(id, begin, end)]) or the refusal's text."""
    payload = b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts)
    out = subprocess.run([str(TOKENIZE), str(model_file), str(max_tokens)], input=payload,
                         capture_output=True, check=True).stdout.decode().splitlines()
    head, *out = out
    assert head in ("words_encode_alone 0", "words_encode_alone 1")
    assert len(out) == len(texts)
    parsed = []
    for line in out:
        if line.startswith("ERROR"):
            parsed.append(line)
            continue
        count, truncated, encoded, *pieces = line.split(" ")
        parsed.append((int(count), truncated == "1", int(encoded),
                       [tuple(int(v) for v in p.split(":")) for p in pieces]))
    return head.endswith("1"), parsed


def assert_pieces_equal_pythons(tok, model_file, texts, limit, tmp_path, alone):
    """The server's pieces of each text are Python's first `limit`, with the same offsets;
    returns (texts truncated, texts of those encoded only in part)."""
    words_alone, got = server_tokens(model_file, texts, limit, tmp_path)
    assert words_alone == alone
    cut = partly = 0
    for text, served in zip(texts, got):
        want = tok.encode_with_offsets(text)
        if not want:
            assert served.startswith("ERROR INVALID_ARGUMENT"), (text, served)
            continue
        count, truncated, encoded, pieces = served
        assert count == min(len(want), limit)
        assert truncated == (len(want) > limit)
        assert pieces == [(i, b, e) for i, _, b, e in want[:limit]], (limit, text[:80])
        assert encoded <= len(text.encode()) and (alone or encoded == len(text.encode()))
        cut += truncated
        partly += encoded < len(text.encode())
    return cut, partly


def cut_checks(model_file, texts, per_text=40):
    """tokenize_texts --check-cuts over `texts`: (cuts checked, cuts whose start of the
    text is not encoded into the whole text's pieces up to the cut, the first few such
    texts with the bad cut's byte offset)."""
    payload = b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts)
    out = subprocess.run([str(TOKENIZE), str(model_file), "0", "--check-cuts", str(per_text)],
                         input=payload, capture_output=True, check=True).stdout.decode()
    _, *lines = out.splitlines()
    assert len(lines) == len(texts)
    checked = bad = 0
    examples = []
    for text, line in zip(texts, lines):
        if line.startswith("ERROR"):  # a text with no pieces: nothing to cut
            continue
        _, n, wrong, *first = line.split(" ")
        checked, bad = checked + int(n), bad + int(wrong)
        if first and len(examples) < 3:
            examples.append((int(first[0]), text[:200]))
    return checked, bad, examples


@pytest.mark.parametrize("corpus,model", [("wordnet", WORDNET[0]), ("spam", SPAM)])
def test_every_cut_the_rule_allows_keeps_the_whole_texts_pieces(corpus, model, tmp_path,
                                                                 request):
    """The prefix rule itself, not only its outcome at a limit (where the one piece read
    beyond max_tokens hides a difference at the cut): at every place IsWordCut allows (up
    to 40 per text), the text's start encodes into the whole text's pieces up to there."""
    splits = request.getfixturevalue(corpus)
    tok, _ = tokenizer_of(model)
    model_file = tmp_path / "tokenizer.model"
    model_file.write_bytes(tok.model_bytes)
    texts = list(splits.test_texts[:1500]) + SPECIAL
    checked, bad, examples = cut_checks(model_file, texts)
    assert bad == 0, examples
    assert checked > (20_000 if corpus == "spam" else 2_000)


# 1 << 20: no truncation, every piece compared. The others: the server encodes a long
# text only as far as its first `limit` + 1 pieces reach; those must be the whole text's.
@pytest.mark.parametrize("corpus,model,limit", [
    ("wordnet", WORDNET[0], 1 << 20), ("spam", SPAM, 1 << 20),
    ("wordnet", WORDNET[0], 8), ("spam", SPAM, 1), ("spam", SPAM, 37), ("spam", SPAM, 128),
    ("spam", SPAM, 500)])
def test_tokenizer_ids_and_offsets_equal_pythons(corpus, model, limit, tmp_path, request):
    splits = request.getfixturevalue(corpus)
    tok, meta = tokenizer_of(model)
    model_file = tmp_path / "tokenizer.model"
    model_file.write_bytes(tok.model_bytes)
    texts = list(splits.test_texts) + SPECIAL
    # The shipped tokenizers encode each word on its own.
    cut, partly = assert_pieces_equal_pythons(tok, model_file, texts, limit, tmp_path, True)
    if limit < 1 << 20:
        assert cut > len(texts) // 10, "the limit must truncate many texts"
        # Short glosses are encoded whole once their start would be most of them.
        assert partly >= cut * (0.5 if corpus == "spam" else 0.3), \
            "truncated texts are encoded only in part"
    else:
        assert partly == 0


def trained_tokenizer(texts, tmp_path, **options):
    """A 1,000-piece unigram SentencePiece model trained on `texts` with `options`: its
    Python Tokenizer and the file the server's tool reads."""
    import io
    import sentencepiece as spm
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=out, model_type="unigram",
        vocab_size=1000, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, byte_fallback=True,
        num_threads=1, minloglevel=2, **options)
    model_file = tmp_path / "trained.model"
    model_file.write_bytes(out.getvalue())
    return Tokenizer.from_bytes(out.getvalue()), model_file


@pytest.mark.parametrize("options", [
    {"normalization_rule_name": "identity"}, {"normalization_rule_name": "nfkc"},
    {"normalization_rule_name": "nmt_nfkc", "remove_extra_whitespaces": False}])
def test_other_normalizers_keep_the_whole_texts_first_pieces(spam, options, tmp_path):
    """Under these normalizers tabs and line breaks are ordinary characters (or spaces are
    not collapsed): the multi-line e-mails are still cut only where a word starts."""
    texts = [t for t in spam.train_texts[:1000] if len(t.encode()) < 4000]
    tok, model_file = trained_tokenizer(texts, tmp_path, **options)
    test = list(spam.test_texts[:800]) + SPECIAL
    for limit in (3, 40, 128):
        cut, partly = assert_pieces_equal_pythons(tok, model_file, test, limit, tmp_path, True)
        assert cut > 100 and partly > cut // 2
    checked, bad, examples = cut_checks(model_file, test)
    assert bad == 0, examples
    assert checked > 15_000


@pytest.mark.parametrize("options", [{"treat_whitespace_as_suffix": True},
                                     {"split_by_whitespace": False}])
def test_a_tokenizer_whose_pieces_cross_words_reads_texts_whole(wordnet, options, tmp_path):
    """Pieces that end in the word marker (treat_whitespace_as_suffix), or hold it within
    (pieces over several words), run across a word's start, so a text's start is not
    encoded as in the whole text: the server encodes every text whole and reads the same
    first pieces as Python."""
    tok, model_file = trained_tokenizer(list(wordnet.train_texts[:6000]), tmp_path, **options)
    marker = "\u2581"
    assert any(marker in tok.piece(i)[1:] for i in range(tok.vocab_size)), \
        "the model must have pieces that cross a word's start"
    texts = [t for t in wordnet.test_texts[:400] if t.strip()]
    assert_pieces_equal_pythons(tok, model_file, texts, 6, tmp_path, False)
    why = subprocess.run([str(TOKENIZE), str(model_file), "6"], input=b"",
                         capture_output=True, check=True).stderr.decode()
    assert why.startswith("its word markers end pieces" if "treat_whitespace_as_suffix" in options
                          else "its piece "), why
    # Why they must: cut where the rule would, their texts' starts differ from the whole.
    checked, bad, _ = cut_checks(model_file, texts)
    assert checked > 1_000 and bad > checked // 20, (checked, bad)


def renamed_rule_tokenizer(wordnet, tmp_path, rule):
    """A tokenizer trained with the normalization rule `rule` (code points, "src\ttarget"),
    then stored under the built-in name nmt_nfkc without its rule table, so that every
    setting and piece the server reads passes: its Python Tokenizer and model file."""
    import io
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as model_pb2
    rules = tmp_path / "rules.tsv"
    rules.write_text(rule + "\n")
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(wordnet.train_texts[:6000])), model_writer=out,
        model_type="unigram", vocab_size=1000, pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
        byte_fallback=True, num_threads=1, minloglevel=2, normalization_rule_tsv=str(rules))
    proto = model_pb2.ModelProto()
    proto.ParseFromString(out.getvalue())
    assert proto.normalizer_spec.name == "user_defined"
    proto.normalizer_spec.name = "nmt_nfkc"
    proto.normalizer_spec.ClearField("normalization_rule_tsv")
    renamed = proto.SerializeToString()
    tok = Tokenizer.from_bytes(renamed)
    assert not any("\u2581" in tok.piece(i)[1:] or " " in tok.piece(i)
                   for i in range(tok.vocab_size))
    model_file = tmp_path / "renamed.model"
    model_file.write_bytes(renamed)
    return tok, model_file


def test_a_normalizer_under_a_built_in_name_that_joins_across_words_reads_texts_whole(
        wordnet, tmp_path):
    """A normalizer that joins a character to the space after it ("x " becomes "y") under
    a built-in's name passes every setting and piece the server reads; the probe text,
    whose word breaks are checked when the tokenizer loads, holds "x ", so the server reads
    every text whole (and says why). The same joining for "q ", which the probe does not
    hold, goes unseen: the probe reaches only the characters it has."""
    tok, model_file = renamed_rule_tokenizer(wordnet, tmp_path, "78 20\t79")  # "x " -> "y"
    texts = [t for t in wordnet.test_texts[:400] if t.strip()] + ["a fox jumps over the box"]
    assert_pieces_equal_pythons(tok, model_file, texts, 4, tmp_path, False)
    why = subprocess.run([str(TOKENIZE), str(model_file), "4"], input=b"",
                         capture_output=True, check=True).stderr.decode()
    assert why.startswith("the probe text cut at byte "), why
    checked, bad, _ = cut_checks(model_file, texts)
    assert checked > 1_000 and bad > 0, (checked, bad)
    _, unseen = renamed_rule_tokenizer(wordnet, tmp_path, "71 20\t79")  # "q " -> "y"
    head = subprocess.run([str(TOKENIZE), str(unseen), "4"], input=b"",
                          capture_output=True, check=True).stdout.decode()
    assert head.strip() == "words_encode_alone 1"


def as_array(t):
    return np.frombuffer(t.data, dtype="<f4").reshape(tuple(t.shape))


def python_logits(module, tok, meta, texts):
    """Each text alone (no padding) through the shipped TorchScript model."""
    out = []
    limit = meta["text"]["max_tokens"]
    with torch.no_grad():
        for text in texts:
            ids = torch.tensor([tok.encode(text)[:limit]], dtype=torch.int64)
            out.append(module(ids, torch.ones_like(ids, dtype=torch.bool))["logits"][0].numpy())
    return np.stack(out)


def whole_bucket(length, max_tokens):
    """The length a GPU instance that records CUDA graphs pads a call of texts of up to
    `length` pieces to (server/tasks/text_batches.h, kWholeBuckets)."""
    bucket = 16
    while bucket < length:
        bucket *= 2
    return max(length, min(bucket, max_tokens))


@pytest.mark.parametrize("model", WORDNET + ("dgt_spam", "transformer_spam",
                                             "difftransformer_spam"))
def test_padding_texts_to_their_whole_length_bucket_keeps_every_output(model, wordnet, spam):
    """What GPU instances with CUDA graphs rely on: a text padded (and masked) to its
    length bucket's full size gives the answers it gives unpadded. Runs the shipped archive
    itself (the CPU server pads only to the call's longest text)."""
    tok, meta = tokenizer_of(model)
    limit = meta["text"]["max_tokens"]
    module = load(model)
    texts = list((wordnet if model.endswith("wordnet") else spam).test_texts[:40])
    pad = meta["text"]["pad_id"]
    padded_some = set()
    with torch.no_grad():
        for text in texts:
            ids = tok.encode(text)[:limit]
            alone = module(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool))
            width = whole_bucket(len(ids), limit)
            row = torch.full((1, width), pad, dtype=torch.int64)
            row[0, :len(ids)] = torch.tensor(ids)
            mask = torch.zeros(1, width, dtype=torch.bool)
            mask[0, :len(ids)] = True
            padded = module(row, mask)
            assert set(padded) == set(alone)
            for name in alone:
                assert (padded[name] - alone[name]).abs().max().item() <= 1e-5, (model, name)
            if width > len(ids):
                padded_some.add(width)
    assert padded_some, "some texts must have been padded"


def kserve_texts(kv, model, texts, outputs=("logits",), parameters=None):
    req = kv.ModelInferRequest(model_name=model)
    req.inputs.add(name="text", datatype="BYTES", shape=[len(texts)])
    for o in outputs:
        req.outputs.add(name=o)
    for k, v in (parameters or {}).items():
        req.parameters[k].string_param = v
    req.raw_input_contents.append(
        b"".join(struct.pack("<I", len(t.encode())) + t.encode() for t in texts))
    return req


def output(resp, name):
    i = [o.name for o in resp.outputs].index(name)
    return np.frombuffer(resp.raw_output_contents[i], dtype="<f4").reshape(
        tuple(resp.outputs[i].shape))


def test_mixed_length_batches_equal_each_text_alone(server, stubs, wordnet, spam):
    kv, kstub, v1, stub = stubs
    for model, splits, count in [(m, wordnet, 48) for m in WORDNET] + [(SPAM, spam, 24)]:
        tok, meta = tokenizer_of(model)
        texts = list(splits.test_texts[:count])
        lengths = {len(tok.encode(t)) for t in texts}
        assert len(lengths) > 5, "the texts must differ in length"
        want = python_logits(load(model), tok, meta, texts)
        # KServe: calls of max_batch_size texts (the served one, from the model's
        # config.pbtxt; gathered into padded calls per bucket).
        size = stub.GetModelMetadata(v1.ModelMetadataRequest(model_name=model),
                                     timeout=30).config.max_batch_size
        assert 1 < size <= meta["max_batch_size"], model
        served = kstub.ModelConfig(kv.ModelConfigRequest(name=model), timeout=30).config
        assert served.max_batch_size == size, model  # both APIs report what the server forms
        got = np.concatenate([
            output(kstub.ModelInfer(kserve_texts(kv, model, texts[at:at + size]), timeout=120),
                   "logits") for at in range(0, len(texts), size)])
        assert np.abs(got - want).max() <= 1e-5, model
        # gatescope.v1: concurrent calls, batched by the dynamic batcher.
        before = metric_value(server, "gatescope_executions_total", model=model) or 0

        def predict(text):
            return stub.Predict(v1.PredictRequest(model_name=model, text=text.encode(), top_k=2),
                                timeout=120)

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            replies = list(pool.map(predict, texts))
        probs = torch.from_numpy(want).softmax(-1).numpy()
        for i, r in enumerate(replies):
            assert r.classes[0].index == int(probs[i].argmax())
            assert abs(r.classes[0].probability - float(probs[i].max())) <= 1e-5
            assert r.classes[0].label == meta["labels"][r.classes[0].index]
            pieces = tok.encode_with_offsets(texts[i])
            read = pieces[:meta["text"]["max_tokens"]]
            assert r.text.pieces_read == len(read)
            assert r.text.truncated == (len(pieces) > len(read))
            assert r.text.chars_read == max(e for _, _, _, e in read)
        after = metric_value(server, "gatescope_executions_total", model=model)
        assert after - before < len(texts), "concurrent texts must have shared model calls"


def test_kserve_labels_through_the_classification_extension(stubs, wordnet):
    kv, kstub, _, _ = stubs
    texts = list(wordnet.test_texts[:3])
    req = kserve_texts(kv, WORDNET[0], texts, outputs=())
    req.outputs.add(name="logits").parameters["classification"].int64_param = 2
    resp = kstub.ModelInfer(req, timeout=60)
    tok, meta = tokenizer_of(WORDNET[0])
    want = python_logits(load(WORDNET[0]), tok, meta, texts)
    i = [o.name for o in resp.outputs].index("logits")
    assert resp.outputs[i].datatype == "BYTES" and list(resp.outputs[i].shape) == [3, 2]
    raw = resp.raw_output_contents[i]
    entries, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        entries.append(raw[at + 4:at + 4 + n].decode())
        at += 4 + n
    for row in range(3):
        score, index, label = entries[2 * row].split(":", 2)
        assert int(index) == int(want[row].argmax()) and label == meta["labels"][int(index)]


def test_explanations_equal_the_python_reference(stubs, wordnet):
    _, _, v1, stub = stubs
    text = wordnet.test_texts[7]
    for model in WORDNET:
        tok, meta = tokenizer_of(model)
        dgt = "gate" in meta["maps"]
        resp = stub.Explain(v1.ExplainRequest(model_name=model, text=text.encode(), rollout=True,
                                              gates=dgt, attention_layers=[1],
                                              attention_queries=[0, 2]), timeout=60)
        pieces = tok.encode_with_offsets(text)
        assert [(t.id, t.piece, t.begin, t.end) for t in resp.text.tokens] == pieces
        ids = torch.tensor([[p[0] for p in pieces]], dtype=torch.int64)
        with torch.no_grad():
            maps = load(model).explain(ids)
        n = len(pieces)
        want = ref.rollout([m[0] for m in maps["attention"]])[0, 1:].numpy()
        assert as_array(resp.rollout).shape == (n,)
        assert np.abs(as_array(resp.rollout) - want).max() <= 1e-5, model
        assert as_array(resp.attention[0]).shape == (meta["heads"], 2, n + 1)
        assert np.abs(as_array(resp.attention[0]) - maps["attention"][1][0][:, [0, 2]].numpy()).max() <= 1e-5
        if dgt:
            assert len(resp.gates) == meta["layers"]
            for layer, g in enumerate(resp.gates):
                assert np.abs(as_array(g) - maps["gate"][layer][0][:, 1:].numpy()).max() <= 1e-5
        else:
            assert not resp.gates
        assert resp.classes[0].index == int(maps["logits"][0][0].argmax())


def test_overlong_text_is_truncated_as_the_metadata_says(stubs, spam):
    _, _, v1, stub = stubs
    tok, meta = tokenizer_of(SPAM)
    limit = meta["text"]["max_tokens"]
    assert meta["text"]["overflow"] == "truncate"
    fits = [t for t in spam.test_texts if len(t.encode()) <= meta["text"]["max_text_bytes"]]
    text = max(fits, key=len)
    pieces = tok.encode_with_offsets(text)
    assert len(pieces) > limit
    r = stub.Predict(v1.PredictRequest(model_name=SPAM, text=text.encode()), timeout=60)
    assert r.text.truncated and r.text.pieces_read == limit
    assert r.text.chars_read == max(e for _, _, _, e in pieces[:limit])
    assert r.text.chars_read < len(text) // 4  # the rest of this long e-mail was not read
    want = python_logits(load(SPAM), tok, meta, [text])[0]
    assert abs(r.classes[0].probability - float(torch.from_numpy(want).softmax(-1).max())) <= 1e-5


def test_bad_text_is_refused_and_the_server_keeps_serving(stubs):
    kv, kstub, v1, stub = stubs
    model = WORDNET[0]
    bad = [b"", b"ok \xff\xfe", b"\xed\xa0\x80", b"a" * 70_000, b"   \n\t "]
    for text in bad:
        with pytest.raises(grpc.RpcError) as err:
            stub.Predict(v1.PredictRequest(model_name=model, text=text), timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, text[:20]
    with pytest.raises(grpc.RpcError) as err:
        stub.Predict(v1.PredictRequest(model_name=model, image=b"\x89PNG"), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    req = kv.ModelInferRequest(model_name=model)
    req.inputs.add(name="text", datatype="BYTES", shape=[2])
    req.raw_input_contents.append(struct.pack("<I", 2) + b"ok" + struct.pack("<I", 2) + b"\xc0\x80")
    with pytest.raises(grpc.RpcError) as err:
        kstub.ModelInfer(req, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "text 1" in err.value.details()
    r = stub.Predict(v1.PredictRequest(model_name=model, text="a small domesticated feline".encode()),
                     timeout=30)
    assert r.classes and r.text.pieces_read > 0


@pytest.mark.parametrize("api", ["gatescope", "kserve"])
def test_load_generator_sends_texts(server, wordnet, tmp_path, api):
    files = []
    for i, text in enumerate(wordnet.test_texts[:16]):
        files.append(tmp_path / f"{i:02d}.txt")
        files[-1].write_text(text, encoding="utf-8")
    perf = [str(REPO / "build" / "client" / "gatescope-perf"), "--server", server.address,
            "--model", "dgt_wordnet", "--api", api, "--concurrency", "4", "--warmup-ms", "200",
            "--window-ms", "300", "--max-windows", "3"]
    before = metric_value(server, "gatescope_requests_total", model="dgt_wordnet",
                          code="OK", kind="predict") or 0
    out = subprocess.run(perf + [str(f) for f in files], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout.splitlines()[-1])
    assert row["ok"] > 0 and row["errors"] == {} and row["server_compute_infer_us"] > 0
    after = metric_value(server, "gatescope_requests_total", model="dgt_wordnet", code="OK",
                         kind="predict")
    assert after - before >= row["ok"]
    # The same files named images: every request is refused, and the exit status says so.
    out = subprocess.run(perf + ["--inputs", "image", str(files[0])], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2
    assert set(json.loads(out.stdout.splitlines()[-1])["errors"]) == {"INVALID_ARGUMENT"}


@pytest.mark.parametrize("model", ["dgt_wordnet", "dgt_spam"])
def test_served_gate_means_match_the_cards_reference(server, stubs, wordnet, spam, model):
    """64 held-out texts through KServe: each is one observation per layer of
    gatescope_gate_mean, whose mean lies within five standard errors of the card's reference
    (plus its 4-decimal rounding); the server exports the card's numbers beside it."""
    kv, kstub, v1, stub = stubs
    [reference] = read_reference(REPO / "model_repository" / model / "README.md")
    assert reference["metric"] == "gatescope_gate_mean"
    texts = list((wordnet if model == "dgt_wordnet" else spam).test_texts[:64])
    layers = range(len(reference["mean"]))

    def observed():
        return [(metric_value(server, "gatescope_gate_mean_count", model=model, layer=str(l))
                 or 0, metric_value(server, "gatescope_gate_mean_sum", model=model,
                                    layer=str(l)) or 0) for l in layers]

    before = observed()
    size = stub.GetModelMetadata(v1.ModelMetadataRequest(model_name=model),
                                 timeout=30).config.max_batch_size
    for at in range(0, len(texts), size):
        kstub.ModelInfer(kserve_texts(kv, model, texts[at:at + size]), timeout=120)
    for l, ((c0, s0), (c1, s1)) in enumerate(zip(before, observed())):
        mean, std = reference["mean"][l], reference["std"][l]
        assert c1 - c0 == len(texts), (model, l)
        assert abs((s1 - s0) / len(texts) - mean) <= 5 * std / np.sqrt(len(texts)) + 1e-4, \
            (model, l, (s1 - s0) / len(texts), mean)
        labels = dict(model=model, statistic="gate_mean", layer=str(l))
        assert metric_value(server, "gatescope_reference_mean", **labels) == mean
        assert metric_value(server, "gatescope_reference_stddev", **labels) == std
