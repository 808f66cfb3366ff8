"""RoPE / YaRN frequencies by hand, the rotation itself, and the mHC Sinkhorn projection."""
import math
import unittest

import torch

from flashdesk_ref import ops

R = ops.Rounding()
YARN = (16.0, 65536.0, 32.0, 1.0)


class RopeTest(unittest.TestCase):
    def test_plain_frequencies(self):
        f = ops.rope_freqs(64, 10000.0)
        self.assertEqual(f[0].item(), 1.0)
        self.assertAlmostEqual(f[1].item(), 10000 ** (-2 / 64), places=6)
        self.assertAlmostEqual(f[31].item(), 10000 ** (-62 / 64), places=9)

    def test_yarn_ramp_of_the_full_size_config(self):
        # c(rot) = 64 ln(65536 / (2 pi rot)) / (2 ln 160000): c(32) = 15.45 -> low 15,
        # c(1) = 24.71 -> high 25; ramp (i - 15) / 10
        plain = ops.rope_freqs(64, 160000.0)
        yarn = ops.rope_freqs(64, 160000.0, YARN)
        for i in range(16):
            self.assertEqual(yarn[i].item(), plain[i].item(), i)          # ramp 0: unchanged
        for i in range(25, 32):
            self.assertAlmostEqual(yarn[i].item() / plain[i].item(), 1 / 16, places=6)
        self.assertAlmostEqual(yarn[20].item() / plain[20].item(), 0.5 / 16 + 0.5, places=6)
        self.assertAlmostEqual(yarn[18].item() / plain[18].item(), 0.3 / 16 + 0.7, places=6)

    def test_rotation_of_adjacent_pairs(self):
        freqs = torch.tensor([1.0, 0.5])
        x = torch.tensor([[9.0, 1.0, 0.0, 1.0, 0.0]])            # head dim 5: rope on the last 4
        cos, sin = ops.rope_cos_sin(freqs, torch.tensor([2]))
        y = ops.rope_tail(R, x, cos, sin)
        self.assertEqual(y[0, 0].item(), 9.0)                     # untouched head part
        want = [math.cos(2.0), math.sin(2.0), math.cos(1.0), math.sin(1.0)]
        for got, w in zip(y[0, 1:].tolist(), want):
            self.assertAlmostEqual(got, w, delta=2 ** -8)        # bf16 result
        back = ops.rope_tail(R, y, cos, sin, inverse=True)
        self.assertTrue(torch.allclose(back, x, atol=2 ** -7))

    def test_position_zero_is_identity_and_heads_broadcast(self):
        x = R.bf16(torch.randn(3, 4, 8))                           # [T, H, D]
        freqs = ops.rope_freqs(4, 10000.0)
        cos, sin = ops.rope_cos_sin(freqs, torch.tensor([0, 0, 0]))
        self.assertTrue(torch.equal(ops.rope_tail(R, x, cos, sin), x))


class MhcTest(unittest.TestCase):
    def mixes(self, seed=0, hc=4, dim=16, comb_scale=0.5):
        g = torch.Generator().manual_seed(seed)
        X = torch.randn(5, hc, dim, generator=g)
        fn = torch.randn((2 + hc) * hc, hc * dim, generator=g) * 0.3
        base = torch.randn((2 + hc) * hc, generator=g)
        scale = torch.tensor([0.5, 0.7, comb_scale])
        return ops.hc_mixes(R, X, fn, base, scale, 1e-20, 1e-6, 20), (X, fn, base, scale)

    def test_sinkhorn_is_doubly_stochastic(self):
        (pre, post, comb), _ = self.mixes()
        self.assertTrue(torch.allclose(comb.sum(-2), torch.ones(5, 4), atol=1e-5))   # columns (last step)
        # rows: 20 rounds leave a residual that depends on how peaked the softmax is
        self.assertTrue(torch.allclose(comb.sum(-1), torch.ones(5, 4), atol=5e-3))
        self.assertTrue(bool((comb > 0).all()))

    def test_sinkhorn_matches_a_plain_loop(self):
        # an independent float64 transcription of docs/model-spec.md §4.1 steps 1-4
        (_, _, comb), (X, fn, base, scale) = self.mixes(2, comb_scale=2.0)
        for t in range(X.shape[0]):
            flat = X[t].reshape(-1).double()
            m = (fn.double() @ flat) / math.sqrt(float((flat * flat).mean()) + 1e-20)
            c = [[float(m[8 + 4 * j + k]) * float(scale[2]) + float(base[8 + 4 * j + k]) for k in range(4)]
                 for j in range(4)]
            for j in range(4):
                mx = max(c[j])
                e = [math.exp(v - mx) for v in c[j]]
                c[j] = [v / sum(e) + 1e-6 for v in e]
            for it in range(20):
                if it:
                    for j in range(4):
                        s = sum(c[j]) + 1e-6
                        c[j] = [v / s for v in c[j]]
                for k in range(4):
                    s = sum(c[j][k] for j in range(4)) + 1e-6
                    for j in range(4):
                        c[j][k] /= s
            self.assertTrue(torch.allclose(comb[t].double(), torch.tensor(c, dtype=torch.float64), atol=1e-5))

    def test_pre_and_post_ranges(self):
        (pre, post, _), _ = self.mixes(1)
        self.assertTrue(bool(((pre > 1e-6) & (pre < 1 + 1e-6 + 1e-7)).all()))
        self.assertTrue(bool(((post > 0) & (post < 2)).all()))

    def test_one_iteration_is_softmax_then_column_normalisation(self):
        X = torch.randn(1, 2, 4)
        fn = torch.zeros(8, 8)
        base = torch.tensor([0, 0, 0, 0, 1.0, 2.0, 3.0, 5.0])
        _, _, comb = ops.hc_mixes(R, X, fn, base, torch.ones(3), 1e-20, 0.0, 1)
        soft = torch.softmax(torch.tensor([[1.0, 2.0], [3.0, 5.0]]), dim=-1)
        self.assertTrue(torch.allclose(comb[0], soft / soft.sum(0, keepdim=True)))

    def test_collapse_and_expand(self):
        X = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])
        pre = torch.tensor([[0.5, 0.25]])
        self.assertEqual(ops.hc_collapse(R, X, pre).tolist(), [[1.25, 2.0]])
        comb = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])     # swap the streams
        post = torch.tensor([[1.0, 2.0]])
        y = torch.tensor([[10.0, 20.0]])
        self.assertEqual(ops.hc_expand(R, X, y, post, comb).tolist(), [[[13.0, 24.0], [21.0, 42.0]]])


if __name__ == "__main__":
    unittest.main()
