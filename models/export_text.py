#!/usr/bin/env python3
"""Exports a trained text classifier checkpoint (models/train_text.py) as self-describing
TorchScript with its tokenizer, config.pbtxt and model card
(gatescope.export.text_classifier; --help lists the options)."""
import sys

from gatescope.export.text_classifier import main

if __name__ == "__main__":
    sys.exit(main())
