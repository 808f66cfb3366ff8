#!/usr/bin/env python3
"""Draws the training curves of a resume directory's logs into a PNG (default
docs/flash-tiny-loss.png): cross-entropy and indexer KL per step (top), evaluation answer
accuracy per task (bottom). Uses matplotlib when installed, else a small numpy rasteriser.

  /usr/bin/python3 tools/train/plot_loss.py out/flash-tiny-resume [--out docs/flash-tiny-loss.png]
"""
import argparse
import csv
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Thirteen eval sets since the sizes run: enough distinct colours that no two curves share one.
COLOURS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
           (0, 0, 0), (120, 200, 120), (250, 200, 0), (90, 60, 200)]


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def smooth(y, k=9):
    if len(y) < k:
        return np.asarray(y, float)
    pad = np.pad(np.asarray(y, float), (k // 2, k // 2), mode="edge")
    return np.convolve(pad, np.ones(k) / k, mode="valid")


def series(train, evals):
    step = [int(r["step"]) for r in train]
    top = {"train CE": (step, smooth([float(r["ce"]) for r in train])),
           "indexer KL": (step, smooth([float(r["kl"]) for r in train]))}
    bottom = {}
    for r in evals:
        if r["mode"] == "bounded":  # within a point or two of exact; eval_log.csv has both
            continue
        key = r["task"]
        xs, ys = bottom.setdefault(key, ([], []))
        xs.append(int(r["step"]))
        ys.append(float(r.get("answer_match") or r["exact_match"]))
    return top, bottom


def plot_matplotlib(top, bottom, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for name, (x, y) in top.items():
        a.plot(x, y, label=name)
    a.set_ylabel("loss (nats/token)")
    a.legend()
    for name, (x, y) in bottom.items():
        b.plot(x, y, marker="o", label=name)
    b.set_ylabel("answer accuracy (exact prefill)")
    b.set_xlabel("step")
    b.set_ylim(0, 1)
    b.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


# ---- fallback rasteriser --------------------------------------------------------------------
FONT = {  # 3x5 glyphs, rows top to bottom
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    " ": "000000000000000", "_": "000000000000111",
}
_LETTERS = ("010101111101101 110101110101110 011100100100011 110101101101110 111100110100111 "
            "111100110100100 011100101101011 101101111101101 111010010010111 001001001101010 "
            "101101110101101 100100100100111 101111111101101 110101101101101 010101101101010 "
            "110101110100100 010101101110011 110101110101101 011100010001110 111010010010010 "
            "101101101101111 101101101101010 101101111111101 101101010101101 101101010010010 "
            "111001010100111").split()
FONT.update({chr(ord("A") + i): g for i, g in enumerate(_LETTERS)})


def _text(img, x, y, s, colour, scale=2):
    for ch in s.upper():
        g = FONT.get(ch, FONT[" "])
        for i, bit in enumerate(g):
            if bit == "1":
                r, c = divmod(i, 3)
                img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = colour
        x += 4 * scale


def _line(img, x0, y0, x1, y1, colour):
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.linspace(x0, x1, n).round().astype(int)
    ys = np.linspace(y0, y1, n).round().astype(int)
    ok = (xs >= 0) & (xs < img.shape[1]) & (ys >= 0) & (ys < img.shape[0])
    img[ys[ok], xs[ok]] = colour
    img[np.clip(ys[ok] + 1, 0, img.shape[0] - 1), xs[ok]] = colour


def _panel(img, box, lines, y_range, x_range, names):
    x0, y0, x1, y1 = box
    img[y0:y1, x0] = img[y1 - 1, x0:x1] = (0, 0, 0)
    lo, hi = y_range
    for frac in (0.0, 0.5, 1.0):
        yy = int(y1 - 1 - frac * (y1 - y0 - 1))
        _text(img, 4, yy - 5, f"{lo + frac * (hi - lo):.2f}"[:5], (0, 0, 0))
        img[yy, x0:x0 + 4] = (0, 0, 0)
    for i, (x, y) in enumerate(lines):
        if len(x) == 0:
            continue
        c = COLOURS[i % len(COLOURS)]
        px = x0 + (np.asarray(x) - x_range[0]) / max(1, x_range[1] - x_range[0]) * (x1 - x0 - 1)
        py = y1 - 1 - (np.clip(np.asarray(y), lo, hi) - lo) / max(1e-9, hi - lo) * (y1 - y0 - 1)
        for a in range(len(px) - 1):
            _line(img, px[a], py[a], px[a + 1], py[a + 1], c)
        if len(px) == 1:
            img[int(py[0]) - 2:int(py[0]) + 2, int(px[0]) - 2:int(px[0]) + 2] = c
        # legend in the margin right of the panel, where it hides no line
        img[y0 + 6 + 14 * i:y0 + 12 + 14 * i, x1 + 10:x1 + 25] = c
        _text(img, x1 + 30, y0 + 5 + 14 * i, names[i][:16], c)


def plot_fallback(top, bottom, out, log=print):
    from demo.png import write_png
    W, H = 980, 700
    right = W - 170  # panels end here; their legends go right of it
    img = np.full((H, W, 3), 255, np.uint8)
    xs = [v for x, _ in list(top.values()) + list(bottom.values()) for v in x] or [0, 1]
    xr = (min(xs), max(xs))
    ys = [v for _, y in top.values() for v in y] or [0, 1]
    _panel(img, (60, 20, right, 330), list(top.values()), (0.0, float(np.nanmax(ys))), xr, list(top))
    _panel(img, (60, 360, right, H - 40), list(bottom.values()), (0.0, 1.0), xr, list(bottom))
    _text(img, 60, H - 30, f"{xr[0]}", (0, 0, 0))
    _text(img, right // 2 - 10, H - 30, "step", (0, 0, 0))
    _text(img, right - 40, H - 30, f"{xr[1]}", (0, 0, 0))
    _text(img, 70, 340, "answer accuracy per eval set (exact prefill)", (0, 0, 0))
    write_png(out, img)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logdir", help="directory with train_log.csv and eval_log.csv")
    ap.add_argument("--out", default="docs/flash-tiny-loss.png")
    a = ap.parse_args(argv)
    top, bottom = series(read_csv(os.path.join(a.logdir, "train_log.csv")),
                         read_csv(os.path.join(a.logdir, "eval_log.csv")))
    try:
        plot_matplotlib(top, bottom, a.out)
    except ImportError:
        plot_fallback(top, bottom, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
