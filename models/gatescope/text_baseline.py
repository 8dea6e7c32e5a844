"""The text classification baseline the text models are compared with: TF-IDF over word
unigrams and bigrams (sublinear tf, min_df 2) and a multinomial logistic regression.

C is chosen among C_GRID on a validation part of the TRAINING split (the training examples
whose id has zlib.crc32 % 5 == 0; the held-out split is never looked at while tuning),
then the model is refitted on the whole training split with that C and scored once on the
held-out split; so is a second fit with the same C and classes weighted inversely to their
training frequency (class_weight="balanced"). Deterministic (lbfgs, no sampling) and
single-threaded.
"""
import time
import zlib
from typing import Dict, List, Sequence

C_GRID = (1.0, 10.0, 100.0)
MAX_ITER = 2000


def _fit_predict(train_texts: Sequence[str], train_labels: Sequence[int],
                 test_texts: Sequence[str], c: float, class_weight=None):
    import numpy as np
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2,
                                 dtype=np.float32)
    x_train = vectorizer.fit_transform(train_texts)
    classifier = LogisticRegression(C=c, max_iter=MAX_ITER, solver="lbfgs", n_jobs=1,
                                    class_weight=class_weight)
    classifier.fit(x_train, list(train_labels))
    return classifier.predict(vectorizer.transform(test_texts)), len(vectorizer.vocabulary_)


def _scores(labels, predicted, num_classes: int) -> Dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score
    return {"accuracy": float(accuracy_score(labels, predicted)),
            # Averaged over all classes of the corpus, absent ones included (F1 0 if predicted
            # but never true), so the number is comparable with the models' macro-F1.
            "macro_f1": float(f1_score(labels, predicted, labels=list(range(num_classes)),
                                       average="macro", zero_division=0))}


def validation_mask(ids: Sequence[str], n: int) -> List[bool]:
    """Which training examples tune C: crc32(id) % 5 == 0 (every 5th by position when the
    splits carry no ids)."""
    if len(ids) == n:
        return [zlib.crc32(i.encode("utf-8")) % 5 == 0 for i in ids]
    return [k % 5 == 0 for k in range(n)]


def tfidf_logreg(splits) -> dict:
    """Tunes, fits and scores the baseline on a gatescope.data.text_corpora.TextSplits.
    Returns {"accuracy", "macro_f1" (held-out), "seconds" (final fit and scoring), "C",
    "validation" ({C: macro-F1 on the validation part}), "tuning_seconds", "features",
    "train_examples", "test_examples", "class_weight_balanced" (accuracy and macro-F1 of the
    same C refitted with class_weight="balanced", the training split's class shares being
    far from the held-out ones on the spam corpus)}."""
    from threadpoolctl import threadpool_limits

    num_classes = len(splits.class_names)
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        val = validation_mask(getattr(splits, "train_ids", []), len(splits.train_texts))
        fit_x = [t for t, v in zip(splits.train_texts, val) if not v]
        fit_y = [y for y, v in zip(splits.train_labels, val) if not v]
        val_x = [t for t, v in zip(splits.train_texts, val) if v]
        val_y = [y for y, v in zip(splits.train_labels, val) if v]
        validation = {}
        for c in C_GRID:
            predicted, _ = _fit_predict(fit_x, fit_y, val_x, c)
            validation[c] = _scores(val_y, predicted, num_classes)["macro_f1"]
        best_c = max(C_GRID, key=lambda c: (validation[c], -c))  # ties: the smaller C
        t1 = time.perf_counter()
        predicted, features = _fit_predict(splits.train_texts, splits.train_labels,
                                           splits.test_texts, best_c)
        t2 = time.perf_counter()
        balanced, _ = _fit_predict(splits.train_texts, splits.train_labels,
                                   splits.test_texts, best_c, class_weight="balanced")
    result = _scores(splits.test_labels, predicted, num_classes)
    result.update({"seconds": round(t2 - t1, 1), "C": best_c,
                   "validation": {str(c): round(f, 4) for c, f in validation.items()},
                   "tuning_seconds": round(t1 - t0, 1), "features": features,
                   "train_examples": len(splits.train_texts),
                   "test_examples": len(splits.test_texts),
                   "class_weight_balanced": _scores(splits.test_labels, balanced, num_classes)})
    return result
