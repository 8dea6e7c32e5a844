#!/usr/bin/env python3
"""Exports a detector checkpoint as self-describing TorchScript and its model card
(gatescope.export.detector; --help lists the options)."""
import sys

from gatescope.export.detector import main

if __name__ == "__main__":
    sys.exit(main())
