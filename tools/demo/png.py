"""Minimal PNG writer and reader (8-bit RGB, zlib via the standard library) for the shape images;
the writer also writes 16-bit RGB (the sealed test set's pictures, sealed_test.py)."""

import struct
import zlib

import numpy as np

_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(rgb, bits=8):
    """PNG bytes of a uint8 array [H, W, 3]; deterministic (filter 0 on every row, zlib level 9).
    bits=16 writes each value v as the 16-bit v * 257 (big-endian), the same picture at 16 bits."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"encode_png needs [H, W, 3] uint8, got shape {rgb.shape}")
    if bits not in (8, 16):
        raise ValueError(f"encode_png writes 8 or 16 bits a channel, not {bits}")
    h, w, _ = rgb.shape
    rows = rgb if bits == 8 else (rgb.astype(">u2") * 257)
    raw = b"".join(b"\x00" + rows[y].tobytes() for y in range(h))
    header = struct.pack(">IIBBBBB", w, h, bits, 2, 0, 0, 0)  # colour type 2 (RGB)
    return _SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b"")


def write_png(path, rgb, bits=8):
    with open(path, "wb") as f:
        f.write(encode_png(rgb, bits))


def decode_png(data):
    """uint8 [H, W, 3] from PNG bytes written by encode_png (8-bit RGB, filter 0 only)."""
    if data[:8] != _SIGNATURE:
        raise ValueError("not a PNG file (bad signature)")
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 2):
                raise ValueError(f"only 8-bit RGB PNGs are supported, got depth {depth} colour type {colour}")
            size = (h, w)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if size is None:
        raise ValueError("PNG has no IHDR chunk")
    h, w = size
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + 3 * w)
    if np.any(rows[:, 0] != 0):
        raise ValueError("PNG uses row filters other than 0 (not written by encode_png)")
    return rows[:, 1:].reshape(h, w, 3).copy()
