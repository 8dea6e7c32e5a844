"""Minimal PNG encoder for 8-bit grayscale images (standard library only)."""
import struct
import zlib

import numpy as np


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data +
            struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def encode_gray_png(image: np.ndarray) -> bytes:
    """Encodes a uint8 [H, W] array as a lossless grayscale PNG."""
    if image.dtype != np.uint8 or image.ndim != 2:
        raise ValueError("expected a uint8 [H, W] array")
    h, w = image.shape
    header = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)  # 8-bit, grayscale
    rows = b"".join(b"\x00" + image[r].tobytes() for r in range(h))  # filter type 0
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) +
            _chunk(b"IDAT", zlib.compress(rows, 9)) + _chunk(b"IEND", b""))
