#!/usr/bin/env python3
"""Writes the monitoring reference (per-layer statistics over the model's held-out data)
into the cards of the shipped models that export statistics: classifiers over the 10,000
Fashion-MNIST test images, segmenters over the held-out Colin27 slices, detectors over the
held-out scenes their training record names, text models over the held-out texts of their
corpus (the one whose classes are their labels).

Usage: /usr/bin/python3 models/monitoring_reference.py [--repo model_repository] [MODEL ...]
"""
import argparse
import json
import pathlib

import torch

from gatescope import ops, paths
from gatescope.export.archive import TRAINING_FILE, read_extra_file, read_metadata
from gatescope.export.monitoring_reference import (classifier_inputs, detector_inputs,
                                                   section, segmenter_inputs, statistics,
                                                   statistics_outputs, text_inputs,
                                                   update_card)


CORPUS_WORDS = {"wordnet": "WordNet noun glosses", "spam": "SpamAssassin e-mails"}


def held_out(model_path):
    """(batches of model inputs, the card's words for them) for the archive's task."""
    meta = read_metadata(model_path)
    if meta["task"] == "image_classification":
        from gatescope.data import fashion_mnist
        images, _ = fashion_mnist.load_split("t10k")
        return classifier_inputs(meta, images), f"the {len(images):,} Fashion-MNIST test images"
    if meta["task"] == "image_segmentation":
        from gatescope.data import colin27
        images = colin27.load_slices()["test"]["images"]
        return segmenter_inputs(meta, images), f"the {len(images)} held-out Colin27 slices"
    if meta["task"] == "object_detection":
        from gatescope.data import detection_scenes
        spec = json.loads(read_extra_file(model_path, TRAINING_FILE))["held_out"]
        scenes = detection_scenes.make_scenes(spec["split"], spec["count"], spec["seed"])
        return (detector_inputs(image for image, _, _ in scenes),
                f"the {spec['count']} held-out scenes (seed {spec['seed']}), each at its own size")
    if meta["task"] == "text_classification":
        from gatescope.data import text_corpora
        from gatescope.text_tokenizer import Tokenizer
        corpus = text_corpora.with_labels(meta["labels"])
        tokenizer = Tokenizer.from_archive(model_path, meta)
        # The server refuses a text without pieces; the reference leaves such texts out.
        texts = [t for t in corpus.test_texts if tokenizer.encode(t)]
        return (text_inputs(meta, tokenizer, texts),
                f"the {len(texts):,} held-out {CORPUS_WORDS[corpus.name]} (first "
                f"{meta['text']['max_tokens']} pieces of each, as the server reads them)")
    raise ValueError(f"{model_path}: no held-out data for task {meta['task']}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repo", default=str(paths.CHECKOUT / "model_repository"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("models", nargs="*", help="default: every model exporting a statistic")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    ops.load()
    repo = pathlib.Path(args.repo)
    names = args.models or sorted(
        d.name for d in repo.iterdir() if (d / "1" / "model.pt").exists()
        and statistics_outputs(read_metadata(d / "1" / "model.pt")))
    for name in names:
        path = repo / name / "1" / "model.pt"
        inputs, source = held_out(path)
        per_example = statistics(path, inputs)
        update_card(repo / name / "README.md", section(per_example, source))
        print(f"{name}: " + ", ".join(f"{o} {v.mean(axis=0).round(4).tolist()}"
                                      for o, v in per_example.items()))


if __name__ == "__main__":
    main()
