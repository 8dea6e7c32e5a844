"""The text classification corpora: sizes, classes and the fixed splits
(gatescope.data.text_corpora). The spam corpus comes from scripts/fetch_text_data.sh
(scripts/test.sh runs it); without it these tests fail and say so."""
import collections
import zlib

import pytest

from gatescope import paths
from gatescope.data import text_corpora as tc

FETCH_HINT = "run scripts/fetch_text_data.sh (it puts the SpamAssassin corpus in build/data/)"


@pytest.fixture(scope="module")
def wordnet():
    return tc.load("wordnet")


@pytest.fixture(scope="module")
def spam():
    if not (paths.spam_dir() / "spam-2").is_dir():
        pytest.fail(f"SpamAssassin corpus missing in {paths.spam_dir()}: {FETCH_HINT}")
    return tc.load("spam")


def _check_common(s, n_classes):
    assert len(s.class_names) == n_classes == len(set(s.class_names))
    for texts, labels, ids in ((s.train_texts, s.train_labels, s.train_ids),
                               (s.test_texts, s.test_labels, s.test_ids)):
        assert len(texts) == len(labels) == len(ids)
        assert all(isinstance(t, str) and t.strip() for t in texts)
        assert set(labels) == set(range(n_classes))  # every class in both splits
        assert len(set(ids)) == len(ids)
    assert not set(s.train_ids) & set(s.test_ids)


def test_wordnet_sizes_classes_split(wordnet):
    s = wordnet
    assert s.name == "wordnet"
    _check_common(s, 26)
    assert s.class_names[0] == "noun.Tops" and s.class_names[-1] == "noun.time"
    assert "noun.communication" in s.class_names
    assert (len(s.train_texts), len(s.test_texts)) == (73974, 8141)
    assert len(s.train_texts) + len(s.test_texts) == 82115
    assert 0.09 < len(s.test_texts) / 82115 < 0.11
    # The split is the documented rule, nothing else.
    assert all(zlib.crc32(i[1:].encode()) % 10 == 0 for i in s.test_ids)
    assert not any(tc.wordnet_held_out(i[1:]) for i in s.train_ids)
    # File order (by offset); the first synset is entity.
    assert s.train_ids == sorted(s.train_ids) and s.test_ids == sorted(s.test_ids)
    assert s.train_ids[0] == "n00001740"
    assert s.train_texts[0].startswith("that which is perceived or known or inferred")
    assert s.train_labels[0] == s.class_names.index("noun.Tops")
    counts = collections.Counter(s.train_labels + s.test_labels)
    assert counts[s.class_names.index("noun.artifact")] == 11587
    assert counts[s.class_names.index("noun.person")] == 11087
    assert not any(t.endswith(" ") or "|" in t[:1] for t in s.train_texts)


def test_wordnet_load_is_fixed(wordnet):
    again = tc.load("wordnet")
    assert again.train_ids == wordnet.train_ids and again.test_ids == wordnet.test_ids
    assert again.test_texts == wordnet.test_texts
    assert again.test_labels == wordnet.test_labels


def test_spam_sizes_classes_split(spam):
    s = spam
    assert s.name == "spam" and s.class_names == ["ham", "spam"]
    _check_common(s, 2)
    assert (len(s.train_texts), len(s.test_texts)) == (3250, 2796)
    assert collections.Counter(s.train_labels) == {0: 2750, 1: 500}
    assert collections.Counter(s.test_labels) == {0: 1400, 1: 1396}
    groups = lambda ids: collections.Counter(i.split("/")[0] for i in ids)  # noqa: E731
    assert groups(s.train_ids) == {"easy-ham-1": 2500, "hard-ham-1": 250, "spam-1": 500}
    assert groups(s.test_ids) == {"easy-ham-2": 1400, "spam-2": 1396}
    for ids, labels in ((s.train_ids, s.train_labels), (s.test_ids, s.test_labels)):
        for i, y in zip(ids, labels):
            assert y == (1 if i.startswith("spam-") else 0)
    assert 0.4 < len(s.test_texts) / 6046 < 0.5
    assert s.train_ids == sorted(s.train_ids) and s.test_ids == sorted(s.test_ids)
    # Subject line + body only: no routing or sender headers left at the top.
    for t in s.train_texts + s.test_texts:
        subject, sep, _ = t.partition("\n\n")
        assert sep and "\n" not in subject
        assert not t.startswith(("Return-Path:", "Received:", "Delivery-Date:"))


def test_spam_load_is_fixed(spam):
    again = tc.load("spam")
    assert again.train_ids == spam.train_ids and again.test_ids == spam.test_ids
    assert again.train_texts == spam.train_texts


def test_email_text_keeps_subject_and_body():
    raw = ("From someone@example.com  Sat Sep 14 04:51:57 2002\r\n"
           "Received: from relay.example.com\r\n\tby mx.example.org\r\n"
           "Subject: Make money\r\n fast\r\n"
           "X-Mailer: Outlook\r\n"
           "\r\n"
           "Body line 1\r\n\r\nBody line 2\r\n")
    assert tc.email_text(raw) == "Make money fast\n\nBody line 1\r\n\r\nBody line 2\r\n"
    assert tc.email_text("To: a@b.c\n\nno subject") == "\n\nno subject"
    assert tc.email_text("Subject: only headers") == "only headers\n\n"


def test_missing_data_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("GATESCOPE_SPAM_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="scripts/fetch_text_data.sh"):
        tc.load("spam")
    monkeypatch.setenv("GATESCOPE_WORDNET_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        tc.load("wordnet")
    with pytest.raises(ValueError, match="unknown text corpus"):
        tc.load("imdb")


def test_wordnet_dir_override(tmp_path, monkeypatch):
    header = "  1 This software and database is being provided to you, the LICENSEE  \n"
    lines = [
        "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which exists  \n",
        "00002137 03 n 02 abstraction 0 abstract_entity 0 000 | a general concept; "
        "\"a | b\"  \n",
        "14580897 27 n 01 material 0 000 | the tangible substance  \n",
    ]
    (tmp_path / "data.noun").write_text(header + "".join(lines))
    monkeypatch.setenv("GATESCOPE_WORDNET_DIR", str(tmp_path))
    s = tc.load("wordnet")
    every = sorted(zip(s.train_ids + s.test_ids, s.train_texts + s.test_texts,
                       s.train_labels + s.test_labels))
    assert every == [("n00001740", "that which exists", 0),
                     ("n00002137", 'a general concept; "a | b"', 0),
                     ("n14580897", "the tangible substance", 24)]


def test_a_corpus_is_found_by_its_labels(wordnet, spam):
    assert tc.with_labels(list(spam.class_names)).name == "spam"
    assert tc.with_labels(list(wordnet.class_names)).name == "wordnet"
    with pytest.raises(ValueError, match="no text corpus has the labels"):
        tc.with_labels(["a", "b"])
