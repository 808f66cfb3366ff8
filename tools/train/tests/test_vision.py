"""Vision pieces against docs/model-spec.md §8 written out by hand: aligner cell order (channel
major, c*9 + kh*3 + kw, zero padding bottom/right), 2D RoPE phases, image span layout, and the
image-span embeddings landing at their positions."""
import unittest

import torch

from helpers import micro_config
from train.config import VisionConfig
from train.numerics import Numerics
from train.rope import vision_tables
from train.vision import Aligner, image_span_rows


class Vision(unittest.TestCase):
    def test_aligner_cell_order_and_padding(self):
        vc = VisionConfig(dict(hidden_size=2, downsample_ratio=3))
        al = Aligner(vc, dim=4)
        captured = {}
        al.w1.weight.data = torch.zeros(4, 18)
        num = Numerics(emulate_fp32=True, qat=False)
        orig = num.linear_bf16

        def spy(x, w, b=None):
            captured.setdefault("x", x)                      # the first call is w1's input
            return orig(x, w, b)
        num.linear_bf16 = spy
        n_h, n_w = 4, 5                                        # padded to 6 x 6: 2 x 2 cells
        feats = torch.zeros(1, n_h * n_w, 2)
        for r in range(n_h):
            for c in range(n_w):
                feats[0, r * n_w + c] = torch.tensor([r * 10 + c + 1.0, -(r * 10 + c + 1.0)])
        al(num, feats, n_h, n_w)
        x = captured["x"]                                     # [1, 4 cells, 18]
        self.assertEqual(x.shape, (1, 4, 18))
        cell = x[0, 1]                                        # row 0, column 1: pixels cols 3..5
        for ch in range(2):
            for kh in range(3):
                for kw in range(3):
                    r, c = kh, 3 + kw
                    want = 0.0 if c >= n_w else (r * 10 + c + 1.0) * (1 if ch == 0 else -1)
                    self.assertEqual(cell[ch * 9 + kh * 3 + kw].item(), want)

    def test_rope_phases(self):
        cos, sin = vision_tables(8, 10000.0, 2, 3, "cpu")     # head 8: axis 4, 2 freqs per axis
        inv = 1.0 / (10000.0 ** (torch.tensor([0.0, 2.0]) / 4))
        p = 1 * 3 + 2                                         # row 1, col 2
        want = torch.cat((1 * inv, 2 * inv))
        torch.testing.assert_close(cos[p], torch.cos(want))
        torch.testing.assert_close(sin[p], torch.sin(want))

    def test_span_layout(self):
        num = Numerics(emulate_fp32=True)
        rows = torch.arange(1, 7, dtype=torch.float32).view(1, 6, 1).expand(1, 6, 2)
        start, nl, end = torch.full((2,), 100.0), torch.full((2,), 200.0), torch.full((2,), 300.0)
        span = image_span_rows(num, rows, 2, 3, start, nl, end)[0, :, 0].tolist()
        self.assertEqual(span, [100, 1, 2, 3, 200, 4, 5, 6, 200, 300])

    def test_image_embeddings_overwrite_span(self):
        from train.model import Transformer
        from train.toy_tasks import ToyTasks
        from train.batch import collate
        cfg = micro_config(vision=True)
        torch.manual_seed(0)
        model = Transformer(cfg)
        s = ToyTasks(cfg).sample("image", 3)
        b = collate([s], 16, 16, [False])
        num = Numerics(emulate_fp32=True)
        emb = model.embed_tokens(num, b)[0]
        im = s.images[0]
        L = im.llm_h * (im.llm_w + 1) + 2
        torch.testing.assert_close(emb[im.start], num.rb(model.image_start.data))
        torch.testing.assert_close(emb[im.start + L - 1], num.rb(model.image_end.data))
        torch.testing.assert_close(emb[im.start + 1 + im.llm_w], num.rb(model.image_newline.data))
        torch.testing.assert_close(emb[0], num.rb(model.embed.weight[s.ids[0]]))
        self.assertTrue(bool(b.is_image[0, im.start:im.start + L].all()))


if __name__ == "__main__":
    unittest.main()
