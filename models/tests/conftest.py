import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
torch.set_num_threads(2)


@pytest.fixture(scope="session")
def ops():
    """The built op library; the suite fails (not skips) when it is missing."""
    from gatescope import ops as gops
    gops.load()
    return torch.ops.gatescope
