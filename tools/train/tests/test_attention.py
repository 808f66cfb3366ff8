"""The batched attention core and indexer selection against per-query loops written from
docs/numerics.md (window [lo, t], top-k entries, sink; block-max candidates)."""
import math
import unittest

import torch

import helpers  # noqa: F401  (sys.path)
from train import indexer as ix
from train.context import window_bounds
from train.sparse_attention import attention_core


def naive(q, kv, lo, sink, kvc=None, idx=None, valid=None, n_vis=None):
    B, N, H, D = q.shape
    out = torch.zeros(B, N, H, D, dtype=torch.float64)
    q, kv = q.double(), kv.double()
    for b in range(B):
        for t in range(N):
            keys = [kv[b, j] for j in range(int(lo[b, t]), t + 1)]
            if kvc is not None:
                if idx is not None:
                    keys += [kvc[b, int(e)].double() for e, ok in zip(idx[b, t], valid[b, t]) if ok]
                else:
                    keys += [kvc[b, e].double() for e in range(int(n_vis[t]))]
            K = torch.stack(keys)
            for h in range(H):
                logits = K @ q[b, t, h] / math.sqrt(D)
                mx = max(logits.max().item(), sink[h].item())
                p = torch.exp(logits - mx)
                out[b, t, h] = (p[:, None] * K).sum(0) / (p.sum() + math.exp(sink[h].item() - mx))
    return out


class AttentionCore(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.B, self.N, self.H, self.D, self.W = 2, 24, 3, 8, 8
        self.q = torch.randn(self.B, self.N, self.H, self.D)
        self.kv = torch.randn(self.B, self.N, self.D)
        self.sink = torch.randn(self.H)
        self.lo, self.lo_d = window_bounds(self.N, self.W, torch.tensor([-1, 13]), "cpu")

    def test_window_only_and_bounded_rows(self):
        for lo in (self.lo, self.lo_d):
            o, _ = attention_core(self.q, self.kv, lo, self.sink, self.W)
            torch.testing.assert_close(o.double(), naive(self.q, self.kv, lo, self.sink),
                                       rtol=1e-5, atol=1e-5)

    def test_topk_entries(self):
        E, k = 12, 4
        kvc = torch.randn(self.B, E, self.D)
        idx = torch.randint(0, E, (self.B, self.N, k))
        n_vis = torch.div(torch.arange(1, self.N + 1), 2, rounding_mode="floor")
        valid = idx < n_vis.view(1, -1, 1)
        o, probs = attention_core(self.q, self.kv, self.lo, self.sink, self.W, kvc, idx, valid)
        torch.testing.assert_close(o.double(), naive(self.q, self.kv, self.lo, self.sink, kvc, idx, valid),
                                   rtol=1e-5, atol=1e-5)
        self.assertTrue(bool((probs[~valid] == 0).all()))

    def test_dense_entries(self):
        E = 24
        kvc = torch.randn(self.B, E, self.D)
        n_vis = torch.arange(1, self.N + 1)
        o, probs = attention_core(self.q, self.kv, self.lo, self.sink, self.W, kvc, n_vis=n_vis)
        torch.testing.assert_close(o.double(), naive(self.q, self.kv, self.lo, self.sink, kvc, n_vis=n_vis),
                                   rtol=1e-5, atol=1e-5)
        # probability mass on compressed entries never exceeds 1 per head
        self.assertTrue(bool((probs <= self.H + 1e-5).all()))


class Selection(unittest.TestCase):
    def test_scores_match_formula(self):
        torch.manual_seed(1)
        qi, ik, w = torch.randn(1, 6, 2, 4), torch.randn(1, 3, 4), torch.randn(1, 6, 2)
        n_vis = torch.div(torch.arange(1, 7), 2, rounding_mode="floor")
        s = ix.index_scores(qi, ik, w, n_vis)
        for t in range(6):
            for e in range(3):
                want = sum(w[0, t, h] * max(0.0, float(qi[0, t, h] @ ik[0, e])) for h in range(2))
                if e < n_vis[t]:
                    self.assertAlmostEqual(s[0, t, e].item(), float(want), places=5)
                else:
                    self.assertEqual(s[0, t, e].item(), float("-inf"))

    def test_candidates_force_newest_block_and_drop_future(self):
        # 10 entries, blocks of 4 (last block padded), keep 2 blocks.
        N, E = 10, 10
        scores = torch.full((1, N, E), float("-inf"))
        n_vis = torch.arange(1, N + 1)
        base = torch.tensor([5.0, 0, 0, 0, 9, 0, 0, 0, 1, 2])
        for t in range(N):
            scores[0, t, :t + 1] = base[:t + 1]
        m = ix.candidate_mask(scores, n_vis, 4, 2)
        # t = 9: newest entry 9 -> block 2 forced; best other block = block 1 (max 9)
        self.assertEqual(m[0, 9].tolist(), [False] * 4 + [True] * 6)
        # t = 5: newest entry 5 -> block 1 forced; other block 0 (max 5); block 2 future (-inf)
        self.assertEqual(m[0, 5].tolist(), [True] * 8 + [False] * 2)
        # t = 1: only block 0 visible; block 1, 2 all -inf -> dropped
        self.assertEqual(m[0, 1].tolist(), [True] * 4 + [False] * 6)

    def test_topk_stable_ties_lower_index_and_invalid_future(self):
        scores = torch.tensor([[[1.0, 1.0, 3.0, 1.0, float("-inf"), float("-inf")]]])
        n_vis = torch.tensor([4])
        idx, valid = ix.select_topk(scores, 3, n_vis, stable=True)
        self.assertEqual(idx[0, 0].tolist(), [0, 1, 2])
        idx, valid = ix.select_topk(scores, 6, n_vis, stable=True)
        self.assertEqual(valid[0, 0].tolist(), [True] * 4 + [False] * 2)


if __name__ == "__main__":
    unittest.main()
