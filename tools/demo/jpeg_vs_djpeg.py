#!/usr/bin/env python3
"""How close jpeg_roundtrip.py's simulated JPEG round trip is to a real one: each picture written
with jpeg.py at a quality, decoded by libjpeg-turbo's djpeg (default islow IDCT, fancy
upsampling), compared with jpeg_roundtrip.roundtrip of the same picture and quality.

A measurement; tests/tools/demo_styles_test.py asserts its bounds (setup.sh installs djpeg,
libjpeg-turbo-progs).
  /usr/bin/python3 tools/demo/jpeg_vs_djpeg.py [--qualities 60 70 80 90 95]
Prints per quality the mean and max absolute difference per channel (R, G, B, in levels), the
share of pixel values that differ at all and of those more than 2 levels apart, over the pictures
of `pictures()` (six, 1.1 M values).
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import jpeg, jpeg_roundtrip, shapes  # noqa: E402
from demo.rng import Rng  # noqa: E402


def pictures():
    """[(name, uint8 [H, W, 3])]: hard and soft edges, odd sizes (partial MCUs), blur and noise."""
    out = []
    for k, (h, w, soft, blur, noise) in enumerate([(168, 168, False, 0, False), (210, 210, True, 0, False),
                                                  (250, 333, False, 1, False), (301, 197, True, 0, True),
                                                  (96, 144, False, 2, True), (480, 360, True, 1, True)]):
        rng = Rng(1000 + k)
        scene = shapes.random_scene(rng)
        side = min(h, w)
        square = shapes.render_soft(scene, side) if soft else shapes.render_scene(scene, side)
        img = np.empty((h, w, 3), np.uint8)
        img[:] = scene["background"]
        img[(h - side) // 2:(h - side) // 2 + side, (w - side) // 2:(w - side) // 2 + side] = square
        if blur:
            img = shapes._blur(img, blur)
        if noise:
            img, _ = shapes._noise(img, rng)
        out.append((f"{h}x{w}", img))
    return out


def djpeg_roundtrip(img, quality, tmp):
    """img written by jpeg.py at `quality`, decoded by djpeg: uint8 [H, W, 3]."""
    src, dst = os.path.join(tmp, "in.jpg"), os.path.join(tmp, "out.ppm")
    jpeg.write_jpeg(src, img, quality)
    subprocess.run(["djpeg", "-outfile", dst, src], check=True)
    with open(dst, "rb") as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:  # P6, width, height, maxval, separated by whitespace
        while data[pos:pos + 1].isspace():
            pos += 1
        end = pos
        while not data[end:end + 1].isspace():
            end += 1
        fields.append(data[pos:end])
        pos = end
    w, h = int(fields[1]), int(fields[2])
    return np.frombuffer(data[pos + 1:pos + 1 + w * h * 3], np.uint8).reshape(h, w, 3)


def compare(qualities):
    """Rows (quality, mean [3], max [3], share differing, share > 2 levels) over pictures()."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for q in qualities:
            diffs = []
            for _, img in pictures():
                real = djpeg_roundtrip(img, q, tmp).astype(np.int32)
                sim = jpeg_roundtrip.roundtrip(img, q).astype(np.int32)
                diffs.append(np.abs(real - sim).reshape(-1, 3))
            d = np.concatenate(diffs)
            rows.append((q, d.mean(0), d.max(0), float((d > 0).mean()), float((d > 2).mean())))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qualities", type=int, nargs="+", default=[60, 70, 80, 90, 95])
    a = ap.parse_args(argv)
    print("quality  mean |diff| R G B     max |diff| R G B   differing   > 2 levels")
    for q, mean, mx, differing, over2 in compare(a.qualities):
        print(f"{q:>7}  {mean[0]:5.3f} {mean[1]:5.3f} {mean[2]:5.3f}  {mx[0]:4d} {mx[1]:4d} {mx[2]:4d}"
              f"    {differing:7.2%}   {over2:8.4%}")


if __name__ == "__main__":
    main()
