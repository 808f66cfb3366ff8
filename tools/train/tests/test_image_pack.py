"""Pictures of many grids packed into one vision call (image_pack.py, vision.packed_cells): the
span layout of docs/model-spec.md §8 from the pack's positions, a picture's embeddings in a
mixed batch equal to the plain per-grid reference (its own tower call without padding, the
aligner over its own grid), and one tower call per band of patch counts whatever the mix."""
import unittest

import numpy as np
import torch

from helpers import micro_config
from train.batch import Sample, SampleImage, collate
from train.image_pack import pack_images
from train.numerics import Numerics

# vit_h, vit_w: two of the three bands of patch counts (PATCH_BANDS) with several grids each
GRIDS = [(12, 12), (13, 13), (4, 7), (7, 4), (5, 5), (12, 12), (6, 9), (21, 21), (19, 20)]


def picture_sample(vit_h, vit_w, seed, r=3, p=14, start=3):
    """A sample of one random picture whose span starts at `start`."""
    rng = np.random.default_rng(seed)
    lh, lw = -(-vit_h // r), -(-vit_w // r)
    span = lh * (lw + 1) + 2
    pixels = rng.normal(0, 0.5, (vit_h * vit_w, 3 * p * p)).astype(np.float32)
    ids = rng.integers(3, 500, start + span + 4)
    ids[start:start + span] = 511
    target = np.zeros(len(ids), bool)
    target[-3:] = True
    mask = np.zeros(len(ids), bool)
    mask[start:start + span] = True
    return Sample("image", ids, target, len(ids) - 3,
                  [SampleImage(start, pixels, vit_h, vit_w, lh, lw)], mask)


def reference_spans(num, model, im):
    """The per-grid embedding of one picture's span, written plainly: tower over its own grid
    (no padding, no mask), aligner over that grid, rows then IMAGE_NEW_LINE per row, START/END."""
    feats = model.vision(num, torch.from_numpy(im.pixels)[None], im.vit_h, im.vit_w)
    rows = model.aligner(num, feats, im.vit_h, im.vit_w)[0].view(im.llm_h, im.llm_w, -1)
    vec = lambda p: num.rb(p.data)[None]
    out = [vec(model.image_start)]
    for i in range(im.llm_h):
        out += [rows[i], vec(model.image_newline)]
    return torch.cat(out + [vec(model.image_end)])


class ImagePack(unittest.TestCase):
    def test_span_positions(self):
        s = picture_sample(4, 7, 0, start=5)                   # llm grid 2 x 3
        (pk,) = pack_images([picture_sample(3, 3, 1), s], N=64)   # one band; s is batch row 1
        layout = {}
        for name in ("cell_pos", "newline_pos", "start_pos", "end_pos"):
            for p in getattr(pk, name).tolist():
                if p >= 64:
                    layout[p - 64 - 5] = name[0]
        self.assertEqual("".join(layout[k] for k in sorted(layout)), "scccncccne")
        self.assertEqual(sorted(layout), list(range(10)))
        self.assertEqual(pk.cell_irc[1:].tolist(), [[1, i, j] for i in range(2) for j in range(3)])

    def test_mixed_grids_equal_the_per_grid_reference(self):
        from train.model import Transformer
        cfg = micro_config(vision=True)
        torch.manual_seed(0)
        model = Transformer(cfg)
        num = Numerics(emulate_fp32=True)
        samples = [picture_sample(h, w, seed) for seed, (h, w) in enumerate(GRIDS)]
        b = collate(samples, 16, 16, [False] * len(samples))
        self.assertEqual([p.pixels.shape[:2] for p in b.images], [(7, 13 * 13), (2, 21 * 21)])
        emb = model.embed_tokens(num, b)
        for row, s in enumerate(samples):
            im = s.images[0]
            L = im.llm_h * (im.llm_w + 1) + 2
            got = emb[row, im.start:im.start + L]
            want = reference_spans(num, model, im)
            # FP32 sums over padded (masked) keys and batched products may round differently,
            # which moves a bf16 result by at most a step now and then.
            torch.testing.assert_close(got, want, rtol=2 ** -7, atol=1e-6, msg=f"grid {GRIDS[row]}")
            self.assertLess(float((got != want).float().mean()), 0.05)
            torch.testing.assert_close(emb[row, :im.start], num.rb(model.embed.weight[s.ids[:im.start]]))

    def test_one_tower_call_per_band(self):
        from train.model import Transformer
        cfg = micro_config(vision=True)
        model = Transformer(cfg)
        calls, encode = [], model.vision.encode
        model.vision.encode = lambda *a, **k: calls.append(1) or encode(*a, **k)
        samples = [picture_sample(h, w, seed) for seed, (h, w) in enumerate(GRIDS)]
        model.embed_tokens(Numerics(emulate_fp32=True), collate(samples, 16, 16, [False] * len(samples)))
        self.assertEqual(len(calls), 2)

    def test_no_pictures(self):
        from helpers import random_samples
        self.assertEqual(collate(random_samples(2, 10, 20, 500), 16, 16, [False, False]).images, [])


if __name__ == "__main__":
    unittest.main()
