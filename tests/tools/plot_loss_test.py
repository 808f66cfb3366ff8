"""The loss-curve plot: which series it draws, and the fallback rasteriser's PNG (no matplotlib)."""

import os
import tempfile
import unittest

import numpy as np

import demo_support  # noqa: F401
from demo import png
from train import plot_loss


def train_rows(n):
    return [{"step": str(i), "ce": str(5.0 / (1 + i)), "kl": "0.1"} for i in range(n)]


def eval_row(step, task, mode, answer):
    return {"step": str(step), "task": task, "mode": mode, "exact_match": "0", "answer_match": str(answer)}


class PlotLossTest(unittest.TestCase):
    def test_bottom_panel_has_one_exact_series_per_eval_set(self):
        evals = [eval_row(s, t, m, a) for s in (10, 20) for t in ("recall_500", "image")
                 for m, a in (("exact", 0.5), ("bounded", 0.25))]
        top, bottom = plot_loss.series(train_rows(30), evals)
        self.assertEqual(set(top), {"train CE", "indexer KL"})
        self.assertEqual(set(bottom), {"recall_500", "image"})
        self.assertEqual(bottom["image"], ([10, 20], [0.5, 0.5]))  # the exact rows' answer accuracy

    def test_fallback_png_has_every_series_colour_and_a_legend_margin(self):
        evals = [eval_row(s, t, "exact", a) for s, a in ((10, 0.2), (20, 0.8)) for t in ("recall_500", "image")]
        top, bottom = plot_loss.series(train_rows(30), evals)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "loss.png")
            plot_loss.plot_fallback(top, bottom, out)
            with open(out, "rb") as f:
                img = png.decode_png(f.read())
        self.assertEqual(img.shape, (700, 980, 3))
        colours = {tuple(c) for c in img.reshape(-1, 3)}
        for c in plot_loss.COLOURS[:2]:
            self.assertIn(c, colours)
        margin = img[:, 980 - 160:]  # right of the panels: only legend swatches and names
        self.assertTrue((margin != 255).any())


if __name__ == "__main__":
    unittest.main()
