#!/usr/bin/env python3
"""Runs the TF-IDF + logistic regression baseline (gatescope.text_baseline) on the text
corpora (gatescope.data.text_corpora: WordNet noun glosses, SpamAssassin e-mails) and
writes the held-out numbers to models/checkpoints/text_baselines.json, where the text model
cards read them. Single-threaded; about 25 CPU minutes, nearly all of it WordNet.

Usage: /usr/bin/python3 models/text_baseline.py [--corpus wordnet --corpus spam]
           [--out models/checkpoints/text_baselines.json]
"""
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402

from gatescope.data import text_corpora  # noqa: E402
from gatescope.text_baseline import tfidf_logreg  # noqa: E402

DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "checkpoints" / "text_baselines.json"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", choices=text_corpora.NAMES,
                        help="corpus to run (repeatable; default: all)")
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT,
                        help="JSON file; corpora not run keep their earlier entries")
    args = parser.parse_args()
    results = {}
    if args.out.exists():
        results = json.loads(args.out.read_text())
    for name in args.corpus or text_corpora.NAMES:
        splits = text_corpora.load(name)
        result = tfidf_logreg(splits)
        result["method"] = ("TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)"
                            " + LogisticRegression(lbfgs, C tuned on a train-only validation"
                            " part)")
        results[name] = result
        print(f"{name}: accuracy {result['accuracy']:.4f} macro-F1 {result['macro_f1']:.4f} "
              f"(C {result['C']}, {result['features']} features, fit {result['seconds']} s, "
              f"tuning {result['tuning_seconds']} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ordered = {k: results[k] for k in sorted(results)}
    args.out.write_text(json.dumps(ordered, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
