"""The batched attention core and indexer selection against per-query references: each query's
official key list (W window slots, then the top-k columns) through the oracle's kernel
(tools/flashdesk_ref ops.sparse_attention, the official online softmax over 64-slot blocks);
the BF16 index score formula; block-max candidates; torch's CPU top-k over each row's width."""
import json
import os
import unittest

import torch

import helpers  # noqa: F401  (sys.path)
from flashdesk_ref import ops as ref_ops
from flashdesk_ref import quant as ref_quant
from train import indexer as ix
from train.context import window_bounds
from train.sparse_attention import attention_core

R32 = ref_ops.Rounding(exact_sums=False)   # FP32 sums, as the trainer's
NO_BF16 = ref_ops.Rounding(exact_sums=False)
NO_BF16.bf16 = lambda x: x                 # the kernel with FP32 probabilities (not official)
TIES = os.path.join(helpers.REPO, "tests", "data", "torch_topk_ties.json")


def reference(q, kv, lo, sink, W, kvc=None, idx=None, valid=None, n_vis=None, rounding=R32):
    """Per query: its key list (window slot i = position max(0, t-W+1) + i, empty outside
    [lo, t]; then the top-k columns in idx order; dense: every visible entry, starting at the
    next 64-slot block) through the oracle's kernel."""
    B, N, H, D = q.shape
    out = torch.zeros(B, N, H, D)
    for b in range(B):
        for t in range(N):
            first = max(0, t - W + 1)
            keys, ok = [], []
            for i in range(W):
                p = first + i
                keys.append(kv[b, min(p, N - 1)])
                ok.append(int(lo[b, t]) <= p <= t)
            if kvc is not None and idx is not None:
                keys += [kvc[b, int(e)] for e in idx[b, t]]
                ok += [bool(v) for v in valid[b, t]]
            elif kvc is not None:
                pad = -W % ref_ops.ATTENTION_BLOCK
                keys += [torch.zeros(D)] * pad + [kvc[b, e] for e in range(kvc.shape[1])]
                ok += [False] * pad + [e < int(n_vis[t]) for e in range(kvc.shape[1])]
            o = ref_ops.sparse_attention(rounding, q[b, t][None], torch.stack(keys)[None],
                                         torch.tensor(ok)[None], sink, torch.tensor(D ** -0.5))
            out[b, t] = o[0]
    return out


def close(test, got, want):
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


class AttentionCore(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.B, self.N, self.H, self.D, self.W = 2, 24, 3, 8, 8
        self.q = torch.randn(self.B, self.N, self.H, self.D)
        self.kv = ref_quant.bf16(torch.randn(self.B, self.N, self.D))
        self.sink = torch.randn(self.H)
        self.lo, self.lo_d = window_bounds(self.N, self.W, torch.tensor([-1, 13]), "cpu")

    def test_window_only_and_bounded_rows(self):
        for lo in (self.lo, self.lo_d):
            o, _ = attention_core(self.q, self.kv, lo, self.sink, self.W)
            close(self, o, reference(self.q, self.kv, lo, self.sink, self.W))

    def test_topk_entries(self):
        E, k = 12, 4
        kvc = ref_quant.bf16(torch.randn(self.B, E, self.D))
        idx = torch.randint(0, E, (self.B, self.N, k)).sort(-1).values
        n_vis = torch.div(torch.arange(1, self.N + 1), 2, rounding_mode="floor")
        valid = idx < n_vis.view(1, -1, 1)
        o, probs = attention_core(self.q, self.kv, self.lo, self.sink, self.W, kvc, idx, valid)
        close(self, o, reference(self.q, self.kv, self.lo, self.sink, self.W, kvc, idx, valid))
        self.assertTrue(bool((probs[~valid] == 0).all()))

    def test_lists_of_several_64_slot_blocks(self):
        # W 64: the window is block 0, the top-k columns block 1 (and 2); W 128: the window alone
        # spans two blocks. Bounded rows and causal starts included.
        for W, N, k in ((64, 192, 80), (128, 256, 16)):
            torch.manual_seed(W)
            q = torch.randn(1, N, 2, 8) * 2
            kv = ref_quant.bf16(torch.randn(1, N, 8))
            sink = torch.tensor([0.5, -1.0])
            _, lo = window_bounds(N, W, torch.tensor([N // 2 + 5]), "cpu")
            E = N // 2
            kvc = ref_quant.bf16(torch.randn(1, E, 8))
            idx = torch.stack([torch.randperm(E)[:k] for _ in range(N)])[None].sort(-1).values
            n_vis = torch.div(torch.arange(1, N + 1), 2, rounding_mode="floor")
            valid = idx < n_vis.view(1, -1, 1)
            o, _ = attention_core(q, kv, lo, sink, W, kvc, idx, valid)
            want = reference(q, kv, lo, sink, W, kvc, idx, valid)
            close(self, o, want)
            # the rule is visible at this size: the same kernel with FP32 probabilities is off
            unrounded = reference(q, kv, lo, sink, W, kvc, idx, valid, rounding=NO_BF16)
            self.assertGreater((unrounded - want).abs().max().item(), 1e-3)

    def test_dense_entries(self):
        E = 24
        kvc = ref_quant.bf16(torch.randn(self.B, E, self.D))
        n_vis = torch.arange(1, self.N + 1)
        o, probs = attention_core(self.q, self.kv, self.lo, self.sink, self.W, kvc, n_vis=n_vis)
        close(self, o, reference(self.q, self.kv, self.lo, self.sink, self.W, kvc, n_vis=n_vis))
        # probability mass on compressed entries never exceeds 1 per head
        self.assertTrue(bool((probs <= self.H + 1e-5).all()))

    def test_gradients_flow_through_the_rounded_probabilities(self):
        q = self.q.clone().requires_grad_(True)
        kv = self.kv.clone().requires_grad_(True)
        sink = self.sink.clone().requires_grad_(True)
        o, _ = attention_core(q, kv, self.lo, sink, self.W)
        o.square().sum().backward()
        for g in (q.grad, kv.grad, sink.grad):
            self.assertTrue(bool(torch.isfinite(g).all()))
            self.assertGreater(g.abs().sum().item(), 0.0)


class Selection(unittest.TestCase):
    def test_scores_are_the_official_bf16_arithmetic(self):
        torch.manual_seed(1)
        qi, ik = torch.randn(1, 6, 2, 4), torch.randn(1, 3, 4)
        w = ref_quant.bf16(torch.randn(1, 6, 2))
        n_vis = torch.div(torch.arange(1, 7), 2, rounding_mode="floor")
        s = ix.index_scores(qi, ik, w, n_vis)
        bf = ref_quant.bf16
        for t in range(6):
            for e in range(3):
                terms = [bf(torch.relu(bf((qi[0, t, h].double() @ ik[0, e].double()).float())) * w[0, t, h])
                         for h in range(2)]
                want = bf(terms[0] + terms[1]).item()
                if e < n_vis[t]:
                    self.assertEqual(s[0, t, e].item(), want, (t, e))
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
        for cpu in (False, True):
            m = ix.candidate_mask(scores, n_vis, 4, 2, cpu)
            # t = 9: newest entry 9 -> block 2 forced; best other block = block 1 (max 9)
            self.assertEqual(m[0, 9].tolist(), [False] * 4 + [True] * 6)
            # t = 5: newest entry 5 -> block 1 forced; other block 0 (max 5); block 2 future (-inf)
            self.assertEqual(m[0, 5].tolist(), [True] * 8 + [False] * 2)
            # t = 1: only block 0 visible; block 1, 2 all -inf -> dropped
            self.assertEqual(m[0, 1].tolist(), [True] * 4 + [False] * 6)

    def test_topk_ascending_and_invalid_future(self):
        scores = torch.tensor([[[1.0, 2.0, 3.0, 1.5, float("-inf"), float("-inf")]]])
        n_vis = torch.tensor([4])
        idx, valid = ix.select_topk(scores, 3, n_vis)
        self.assertEqual(idx[0, 0].tolist(), [1, 2, 3])
        idx, valid = ix.select_topk(scores, 6, n_vis, cpu=True)
        self.assertEqual(idx[0, 0].tolist(), list(range(6)))
        self.assertEqual(valid[0, 0].tolist(), [True] * 4 + [False] * 2)

    def test_cpu_topk_is_torchs_choice_among_ties_over_each_rows_width(self):
        with open(TIES) as f:
            cases = [c for c in json.load(f)["cases"] if c["dtype"] == "float32"]
        for c in cases:
            v = torch.tensor([float("-inf") if isinstance(x, str) else x for x in c["values"]])
            n, k = len(v), c["k"]
            want = sorted(c["unsorted"])
            # the row inside a wider batch row: widths cut it back to its own n entries
            wide = torch.cat((v, torch.randn(n))).view(1, 1, 2 * n)
            idx, ok = ix.select_topk(wide, k, torch.tensor([2 * n]), cpu=True, widths=torch.tensor([n]))
            self.assertEqual(idx[0, 0].tolist(), want, (n, k))
            self.assertTrue(bool(ok.all()))
        # a narrower width leaves its extra columns invalid
        idx, ok = ix.select_topk(torch.arange(8.0).view(1, 1, 8), 4, torch.tensor([8]), True,
                                 torch.tensor([2]))
        self.assertEqual((idx[0, 0, :2].tolist(), ok[0, 0].tolist()), ([0, 1], [True, True, False, False]))


if __name__ == "__main__":
    unittest.main()
