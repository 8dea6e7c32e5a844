"""The text tokenizer's contract (gatescope.text_tokenizer): ids, normalization round trip,
code point offsets into the original text for any Unicode, deterministic training."""
import random

import pytest
from sentencepiece import sentencepiece_pb2

from gatescope import text_tokenizer as tt
from gatescope.data import text_corpora

VOCAB = 500
EXTRA = ["Café au lait, naïve façade.", "Привет, как дела?", "中文文本分类",
         "OK 👍 thanks"]


@pytest.fixture(scope="module")
def texts():
    return text_corpora.load("wordnet").train_texts[:3000] + EXTRA


@pytest.fixture(scope="module")
def model_bytes(texts):
    return tt.train_tokenizer(texts, VOCAB)


@pytest.fixture(scope="module")
def tok(model_bytes):
    return tt.Tokenizer.from_bytes(model_bytes)


def check_offsets(tok, text):
    """The offset contract of the module docstring; returns the pieces."""
    pieces = tok.encode_with_offsets(text)
    assert [p[0] for p in pieces] == tok.encode(text)
    assert [p[1] for p in pieces] == [tok.piece(p[0]) for p in pieces]
    if not pieces:
        return pieces
    for _, _, begin, end in pieces:
        assert 0 <= begin <= end <= len(text)
    for a, b in zip(pieces, pieces[1:]):
        assert a[3] == b[2], (a, b)  # contiguous, in order
    first, last = pieces[0][2], pieces[-1][3]
    dropped = text[:first] + text[last:]
    assert all(c.isspace() or not c.isprintable() for c in dropped), repr(dropped)
    assert "".join(text[b:e] for _, _, b, e in pieces) == text[first:last]
    return pieces


def test_ids(tok):
    assert tok.vocab_size == VOCAB
    assert tok.pad_id == tt.PAD_ID == 0 and tok.piece(0) == "<pad>"
    assert tok.unk_id == tt.UNK_ID == 1 and tok.piece(1) == "<unk>"
    assert [tok.piece(i) for i in (2, 3, 257)] == ["<0x00>", "<0x01>", "<0xFF>"]
    assert 0 not in tok.encode("the cat sat on the mat")  # pad never comes out


def test_training_is_deterministic(texts, model_bytes):
    assert tt.train_tokenizer(texts, VOCAB) == model_bytes


def test_round_trip_is_the_normalized_text(tok):
    rng = random.Random(0)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"()-\t\n"
    for _ in range(50):
        x = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 200)))
        assert tok.decode(tok.encode(x)) == " ".join(x.lower().split())
    cases = {
        "  Hello   World  ": "hello world",
        "Café  Straße naïve": "café straße naïve",
        "中文 Привет МИР": "中文 привет мир",
        "ﬁne ①": "fine 1",  # NFKC
        "e\u0301": "\u00e9",  # NFKC composes
        "👍🏽 ok 👨\u200d👩\u200d👧": "👍🏽 ok 👨\u200d👩\u200d👧",
        "": "",
    }
    for x, normalized in cases.items():
        assert tok.decode(tok.encode(x)) == normalized, x


@pytest.mark.parametrize("text", [
    "The quick brown fox, jumps over the lazy dog!",
    "  leading and trailing whitespace \t\n",
    "Café déjà vu, naïve façade, Straße",
    "中文文本分类 and 日本語",
    "Привет, мир! Съешь же ещё этих мягких булок",
    "👍🏽 great 👨\u200d👩\u200d👧\u200d👦 family 🏳️\u200d🌈 flag",
    "ﬁ ① ㎏ e\u0301 ǅ",
    "mixed\x00control\x01chars\u200bzero width",
    "a\r\nb\n\nc",
])
def test_offsets(tok, text):
    check_offsets(tok, text)


def test_offsets_details(tok):
    # A piece starting a word covers the whitespace before it, in the original text.
    pieces = check_offsets(tok, "Hello  World")
    assert pieces[0][2] == 0 and pieces[-1][3] == 12
    assert "".join(p for _, p, _, _ in pieces).replace("\u2581", " ").strip() == "hello world"
    # An emoji outside the vocabulary: its UTF-8 bytes, one piece each; all but the last
    # have the empty span at the character's start, the last spans the character.
    text = "ok 👍🏽"
    pieces = check_offsets(tok, text)
    byte_pieces = [p for p in pieces if p[1].startswith("<0x")]
    assert len(byte_pieces) == 8  # two code points, four bytes each
    spans = [(b, e) for _, _, b, e in byte_pieces]
    assert spans == [(3, 3)] * 3 + [(3, 4)] + [(4, 4)] * 3 + [(4, 5)]
    assert tt.UNK_ID not in tok.encode(text)


def test_no_unknowns_for_any_unicode(tok):
    rng = random.Random(1)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x52F), (0x4E00, 0x9FFF),
              (0x1F300, 0x1FAFF), (0x0600, 0x06FF), (0xAC00, 0xD7A3)]
    chars = []
    for _ in range(2000):
        lo, hi = rng.choice(ranges)
        chars.append(chr(rng.randint(lo, hi)))
    text = "".join(chars)
    assert tt.UNK_ID not in tok.encode(text)
    check_offsets(tok, text)


def test_empty_and_blank(tok):
    assert tok.encode("") == [] and tok.encode_with_offsets("") == []
    assert tok.encode(" \t\n ") == [] and tok.encode_with_offsets(" \n") == []


def test_long_text(tok):
    text = ("Hällo wörld, 中文 and 👍🏽 emoji; the quick brown fox. " * 2000)[:100_000]
    assert len(text) == 100_000
    pieces = check_offsets(tok, text)
    assert pieces[0][2] == 0 and pieces[-1][3] == len(text.rstrip())
    assert len(pieces) > 20_000


def test_lone_surrogate_keeps_offsets(tok):
    pieces = check_offsets(tok, "a\ud800b")
    assert pieces[-1][3] == 3


def test_byte_offset_conversion(tok):
    # SentencePiece's serialized proto carries UTF-8 byte offsets (what the C++ library and
    # some Python wrapper versions report); converted, they must equal the code point spans.
    for text in ["héllo 中文 👍🏽 ①㎏", "  Привет\x00\x01 e\u0301 x  "]:
        proto = sentencepiece_pb2.SentencePieceText()
        proto.ParseFromString(tok._sp.EncodeAsSerializedProto(text))
        char_at = tt._byte_to_char(text)
        converted = [(p.id, p.piece, char_at[p.begin], char_at[p.end]) for p in proto.pieces]
        assert converted == tok.encode_with_offsets(text)


def test_batch_matches_single(tok):
    batch = ["one text", "", "Ещё 👍"]
    assert tok.encode_batch(batch) == [tok.encode(t) for t in batch]


def test_vocab_sizes_cover_the_corpora():
    assert set(tt.VOCAB_SIZES) == set(text_corpora.NAMES)
