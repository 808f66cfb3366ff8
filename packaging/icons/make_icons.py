#!/usr/bin/env python3
"""Draws the hicolor PNGs from the same shapes as flashdesk.svg (a blue rounded square, a white
bolt), with the standard library only: Debian 12's python3 has no PIL. Rerun after editing the SVG's
shapes here too: python3 packaging/icons/make_icons.py"""
import pathlib
import struct
import zlib

BLUE, WHITE = (0x2D, 0x5B, 0xE3), (0xFF, 0xFF, 0xFF)
BOLT = [(146, 36), (70, 142), (122, 142), (102, 220), (186, 108), (134, 108)]  # 256-unit canvas
SUPERSAMPLE = 4  # sub-pixels per side, for smooth edges


def in_rounded_square(x, y):
    lo, hi, r = 16, 240, 48
    if not (lo <= x <= hi and lo <= y <= hi):
        return False
    cx = min(max(x, lo + r), hi - r)
    cy = min(max(y, lo + r), hi - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def in_bolt(x, y):  # even-odd rule
    inside = False
    for (x1, y1), (x2, y2) in zip(BOLT, BOLT[1:] + BOLT[:1]):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def pixel(px, py, size):
    rgb, alpha = [0, 0, 0], 0
    for sy in range(SUPERSAMPLE):
        for sx in range(SUPERSAMPLE):
            x = (px + (sx + 0.5) / SUPERSAMPLE) * 256 / size
            y = (py + (sy + 0.5) / SUPERSAMPLE) * 256 / size
            if in_rounded_square(x, y):
                colour = WHITE if in_bolt(x, y) else BLUE
                rgb = [a + b for a, b in zip(rgb, colour)]
                alpha += 1
    if alpha == 0:
        return bytes(4)
    return bytes([c // alpha for c in rgb] + [255 * alpha // SUPERSAMPLE**2])


def png(size):
    rows = b"".join(b"\0" + b"".join(pixel(x, y, size) for x in range(size)) for y in range(size))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


if __name__ == "__main__":
    here = pathlib.Path(__file__).parent
    for size in (32, 48, 128, 256):
        (here / f"flashdesk-{size}.png").write_bytes(png(size))
