#!/usr/bin/env python3
"""Exports a trained classifier checkpoint as self-describing TorchScript and its model card
(gatescope.export.classifier; --help lists the options)."""
import sys

from gatescope.export.classifier import main

if __name__ == "__main__":
    sys.exit(main())
