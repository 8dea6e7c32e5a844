"""Locates and loads the gatescope op library (libgatescope_ops.so).

Search order: $GATESCOPE_OPS_LIB, then <checkout>/build/models/ops/ (gatescope.paths). Loading
is idempotent; `available()` tells whether torch.ops.gatescope is usable.
"""
import torch

from gatescope import paths

_loaded_path = None


def library_path():
    return paths.ops_library()


def load():
    """Loads the op library once; raises FileNotFoundError if it was not built."""
    global _loaded_path
    if _loaded_path is not None:
        return _loaded_path
    path = library_path()
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: build the project (scripts/build.sh) or set GATESCOPE_OPS_LIB")
    torch.ops.load_library(str(path))
    _loaded_path = path
    return path


def available():
    try:
        load()
        return True
    except FileNotFoundError:
        return False
