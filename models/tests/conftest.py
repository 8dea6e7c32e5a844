import pathlib

import pytest
import torch

from gatescope import paths

CHECKOUT = pathlib.Path(__file__).resolve().parents[2]
if paths.CHECKOUT != CHECKOUT:
    # The package is installed in editable mode from one checkout at a time; testing
    # another checkout's code would pass or fail for the wrong reasons.
    pytest.exit(f"gatescope is imported from {paths.PACKAGE_DIR}, not from this checkout "
                f"({CHECKOUT}): run scripts/install_python.sh", returncode=4)
torch.set_num_threads(2)


@pytest.fixture(scope="session")
def ops():
    """The built op library; the suite fails (not skips) when it is missing."""
    from gatescope import ops as gops
    gops.load()
    return torch.ops.gatescope
