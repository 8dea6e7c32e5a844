"""The direct PNG reader (server/preprocess/png_direct.h) on files written by an encoder
other than libpng: benchmarks/bench_png_decode.py's RGB and RGBA scenes, whose rows use the
five filters in turn (filtered by numpy), and the Fashion-MNIST inputs. decode_images
(tests/tools) reads every file both ways and reports whether any pixel differs; the direct
reader must take every file and agree with libpng on each."""
import json
import subprocess
import sys

import pytest

from server_harness import BUILD, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_png_decode import colour_copies  # noqa: E402
from bench_serving import write_inputs  # noqa: E402

TOOL = BUILD / "tests" / "decode_images"


def decode(paths, rgb):
    out = subprocess.run([str(TOOL), "--repeat", "1", *(["--rgb"] if rgb else []), *paths],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.parametrize("channels", [3, 4])
def test_filtered_colour_pngs_read_directly_as_libpng_reads_them(tmp_path, channels):
    scenes = write_inputs("object_detection", tmp_path / "gray")
    paths = colour_copies(scenes, tmp_path / "colour", channels)
    for rgb in (True, False):  # as gray, colour files are left to libpng
        code, report = decode(paths, rgb)
        assert code == 0 and report["differ"] == 0, report
        assert report["files"] == len(paths)
        assert report["direct"] == (len(paths) if rgb else 0), report


def test_fashion_mnist_inputs_read_directly(tmp_path):
    paths = write_inputs("image_classification", tmp_path)
    code, report = decode(paths, rgb=False)
    assert code == 0 and report == {**report, "files": 64, "direct": 64, "differ": 0}


def test_damaged_png_is_left_to_libpng(tmp_path):
    """A Fashion-MNIST PNG with a damaged IDAT (its CRC no longer matches): the direct reader
    declines it, and the served path and libpng alone both refuse it (counted as agreeing)."""
    good = write_inputs("image_classification", tmp_path / "good")[:1]
    data = bytearray(open(good[0], "rb").read())
    data[45] ^= 0x40  # inside IDAT's payload
    bad = tmp_path / "bad.png"
    bad.write_bytes(bytes(data))
    code, report = decode([str(bad)], rgb=False)
    assert code == 0 and report["direct"] == 0 and report["differ"] == 0, report
    code, report = decode([good[0], str(bad)], rgb=False)
    assert code == 0 and report["direct"] == 1 and report["files"] == 2, report
