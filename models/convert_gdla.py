#!/usr/bin/env python3
"""Converts a PVT-GDLA / PVT-LinearAttn checkpoint into a served model
(gatescope.export.convert_gdla; --help lists the options)."""
import sys

from gatescope.export.convert_gdla import main

if __name__ == "__main__":
    sys.exit(main())
