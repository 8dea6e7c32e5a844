#!/usr/bin/env python3
"""Writes the monitoring reference (per-layer gate / vigilance statistics over the 10,000
Fashion-MNIST test images) into the cards of the shipped classifiers that export them.

Usage: /usr/bin/python3 models/monitoring_reference.py [--repo model_repository] [MODEL ...]
"""
import argparse
import pathlib

import torch

from gatescope import ops, paths
from gatescope.data import fashion_mnist
from gatescope.export.archive import read_metadata
from gatescope.export.monitoring_reference import METRICS, section, statistics, update_card


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
        and any(o in METRICS for o in read_metadata(d / "1" / "model.pt")["outputs"]))
    images, _ = fashion_mnist.load_split("t10k")
    for name in names:
        per_example = statistics(repo / name / "1" / "model.pt", images)
        update_card(repo / name / "README.md",
                    section(per_example, f"the {len(images):,} Fashion-MNIST test images"))
        print(f"{name}: " + ", ".join(f"{o} {v.mean(axis=0).round(4).tolist()}"
                                      for o, v in per_example.items()))


if __name__ == "__main__":
    main()
