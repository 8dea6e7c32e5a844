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


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def decode_png(data: bytes) -> np.ndarray:
    """Decodes a non-interlaced 8-bit PNG (gray, gray+alpha, RGB or RGBA) into uint8
    [H, W] or [H, W, channels]. For tests; slow on large images."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    w, h, depth, color, _, _, interlace = header
    channels = {0: 1, 4: 2, 2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError("only non-interlaced 8-bit gray/RGB(A) PNGs are supported")
    raw = zlib.decompress(idat)
    stride = w * channels
    out = np.zeros((h, stride), np.uint8)
    prev = [0] * stride
    for r in range(h):
        kind, row = raw[r * (stride + 1)], list(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - channels] if i >= channels else 0
            c = prev[i - channels] if i >= channels else 0
            pred = (0, a, prev[i], (a + prev[i]) // 2, _paeth(a, prev[i], c))[kind]
            row[i] = (row[i] + pred) & 0xFF
        out[r] = row
        prev = row
    return out.reshape(h, w) if channels == 1 else out.reshape(h, w, channels)
