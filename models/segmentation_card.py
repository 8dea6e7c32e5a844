#!/usr/bin/env python3
"""Evaluates the exported segmenters on the held-out slices and writes their model cards
(gatescope.export.segmentation_card; --help lists the options)."""
import sys

from gatescope.export.segmentation_card import main

if __name__ == "__main__":
    sys.exit(main())
