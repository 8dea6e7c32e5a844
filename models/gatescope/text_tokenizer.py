"""The text models' tokenizer: a SentencePiece unigram model with byte fallback.

Choice. The DGSA paper's text experiments use a word vocabulary (words seen at least twice,
at most 60,000 entries). A served model sees real, noisy text (raw e-mail bodies with HTML,
URLs, base64, misspellings, any script, emoji), where a word vocabulary maps everything
unseen to one <unk> and costs 60,000 x dim embedding parameters, most of them for words seen
twice. Subwords cover any word with a few pieces, and byte fallback (every character
outside the vocabulary becomes its UTF-8 bytes, <0x00> ... <0xFF>, 256 fixed ids) means no
input ever becomes <unk>. Unigram rather than BPE: it is SentencePiece's default, segments
by the most probable split under a unigram language model rather than by a fixed greedy
merge order (Kudo 2018, "Subword Regularization"), and its lattice allows subword sampling
should a training script want it.

Settings (train_tokenizer): normalization "nmt_nfkc_cf" (NFKC, case folding, most control
characters dropped, unusual whitespace mapped to a space, runs of whitespace collapsed,
leading and trailing whitespace dropped), byte_fallback, character_coverage 0.9995 (the
rarest characters, 0.05 % of all occurrences, are left to byte fallback instead of taking
vocabulary entries), ids <pad> = 0, <unk> = 1, no <s> / </s> (bos_id = eos_id = -1: a
classifier has no use for them), then the 256 byte pieces (ids 2-257), then the learnt
pieces. Single-threaded and deterministic: training texts are split into lines (long lines
cut into MAX_CHUNK_CHARS pieces, so nothing is skipped for length), more than max_sentences
lines are subsampled by a fixed rule (every k-th), SentencePiece's own sampling and
shuffling are off; training twice on the same texts gives byte-identical models
(models/tests/test_text_tokenizer.py checks it).

Vocabulary sizes (VOCAB_SIZES): 8,000 for both corpora. The models are tiny (dim 64), so the
embedding table, 8,000 x 64 = 512k parameters, is already most of a model. Measured on the
held-out splits with tokenizers trained on the training splits: WordNet glosses take 1.38
pieces per whitespace-separated word at 8,000 (median 15 pieces a gloss), 1.59 at 4,000
(+15 %), 1.27 at 16,000 (-8 % for twice the table); the e-mails 2.86 (base64, HTML and
URLs are long "words"), 3.09 at 4,000 (+8 %), 2.72 at 16,000 (-5 %). No piece is ever
<unk>; 0.2-0.3 % of the pieces are bytes. Training takes about 10 s (WordNet, 74k lines)
and 100 s (e-mails, 210k lines) on one core.

Offsets (Tokenizer.encode_with_offsets): (id, piece, begin, end), begin/end Unicode code
point offsets into the ORIGINAL text (Python string indices), not the normalized one. The
spans of consecutive pieces are contiguous (each begins where the previous one ends); the
first begins after, and the last ends before, any leading or trailing characters the
normalizer drops (whitespace, control and zero-width characters). A piece's span holds the
original characters it came from: "▁w" from "  W" covers both spaces and the W, a
character the normalizer drops inside the text belongs to a neighbouring piece, NFKC "e" +
U+0301 -> "é" is one span. When one original character yields several pieces (its UTF-8
bytes under byte fallback, or an NFKC expansion such as "㎏" -> "k", "g"), all but the last
have the empty span (c, c) at the character's start and the last spans (c, c + 1). "" and
whitespace-only texts encode to []. Lone surrogates (not UTF-8) are read as "?", one for one.
"""
import io
from typing import Iterable, List, Sequence, Tuple

import sentencepiece as spm

VOCAB_SIZES = {"wordnet": 8000, "spam": 8000}
PAD_ID = 0
UNK_ID = 1
MAX_CHUNK_CHARS = 4000     # training lines are cut to this many characters
MAX_SENTENCE_BYTES = 16384  # SentencePiece skips longer training sentences; chunks fit
DEFAULT_MAX_SENTENCES = 300_000


def _training_lines(texts: Iterable[str]) -> List[str]:
    lines = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            for start in range(0, len(line), MAX_CHUNK_CHARS):
                lines.append(line[start:start + MAX_CHUNK_CHARS])
    return lines


def train_tokenizer(texts: Iterable[str], vocab_size: int, model_type: str = "unigram",
                    max_sentences: int = DEFAULT_MAX_SENTENCES) -> bytes:
    """Trains a SentencePiece model on `texts` (the TRAINING split only) in memory and
    returns the serialized model (Tokenizer.from_bytes loads it). model_type: "unigram"
    (the choice, see the module docstring), "bpe", "word" or "char"."""
    lines = _training_lines(texts)
    if not lines:
        raise ValueError("train_tokenizer: no non-empty training text")
    if len(lines) > max_sentences:
        step = len(lines) / max_sentences
        lines = [lines[int(i * step)] for i in range(max_sentences)]
    spm.set_random_generator_seed(0)  # nothing below samples; fixed in case a version does
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        model_type=model_type,
        vocab_size=vocab_size,
        pad_id=PAD_ID, unk_id=UNK_ID, bos_id=-1, eos_id=-1,
        normalization_rule_name="nmt_nfkc_cf",
        byte_fallback=True,
        character_coverage=0.9995,
        input_sentence_size=max_sentences,
        shuffle_input_sentence=False,
        max_sentence_length=MAX_SENTENCE_BYTES,
        num_threads=1,
        minloglevel=2,  # warnings and errors only
    )
    return out.getvalue()


def _encodable(text: str) -> str:
    """`text` with lone surrogates (not UTF-8 encodable) replaced one for one by '?', so
    code point offsets are unchanged."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


class Tokenizer:
    """A loaded SentencePiece model (see the module docstring for the contract)."""

    def __init__(self, processor: spm.SentencePieceProcessor, model_bytes: bytes):
        self._sp = processor
        self.model_bytes = model_bytes
        self.vocab_size = processor.GetPieceSize()
        self.pad_id = processor.pad_id()
        self.unk_id = processor.unk_id()
        # The Python wrapper reports immutable-proto spans in code points in some versions
        # (0.1.97 converts them) and in UTF-8 bytes, as the C++ library does, in others.
        probe = processor.EncodeAsImmutableProto("\u00e9")
        self._byte_offsets = probe.pieces[len(probe.pieces) - 1].end == 2

    @classmethod
    def from_bytes(cls, model_bytes: bytes) -> "Tokenizer":
        sp = spm.SentencePieceProcessor()
        sp.LoadFromSerializedProto(model_bytes)
        return cls(sp, bytes(model_bytes))

    @classmethod
    def from_archive(cls, path, meta=None) -> "Tokenizer":
        """The tokenizer a text model's archive at `path` carries (the extra file its
        metadata's text.tokenizer_file names; `meta`: its metadata, read if not given)."""
        from gatescope.export.archive import read_extra_bytes, read_metadata
        meta = meta if meta is not None else read_metadata(path)
        return cls.from_bytes(read_extra_bytes(path, meta["text"]["tokenizer_file"]))

    def piece(self, id: int) -> str:
        return self._sp.IdToPiece(id)

    def encode(self, text: str) -> List[int]:
        return self._sp.EncodeAsIds(_encodable(text))

    def encode_batch(self, texts: Sequence[str]) -> List[List[int]]:
        return self._sp.EncodeAsIds([_encodable(t) for t in texts])

    def decode(self, ids: Sequence[int]) -> str:
        """The normalized text of `ids` (decode(encode(x)) is x normalized)."""
        return self._sp.DecodeIds(list(ids))

    def encode_with_offsets(self, text: str) -> List[Tuple[int, str, int, int]]:
        text = _encodable(text)
        proto = self._sp.EncodeAsImmutableProto(text)
        pieces = [(p.id, p.piece, p.begin, p.end) for p in proto.pieces]
        if not self._byte_offsets or text.isascii():
            return pieces
        char_at = _byte_to_char(text)
        return [(i, p, char_at[b], char_at[e]) for i, p, b, e in pieces]


def _byte_to_char(text: str) -> List[int]:
    """For each UTF-8 byte offset 0..len(bytes) the code point offset of the character
    starting there (a character's continuation bytes map to the character's end, never
    produced as spans by SentencePiece)."""
    out = []
    for i, ch in enumerate(text):
        n = len(ch.encode("utf-8"))
        out.append(i)
        out.extend([i + 1] * (n - 1))
    out.append(len(text))
    return out

