"""The oracle's official-kernel numerics (docs/numerics.md): the blocked FP8/FP4 GEMM sum, the
online softmax of sparse attention over 64-slot blocks, the window slots of a query's key list,
and torch.topk's choice among tied scores."""
import json
import math
import os
import unittest

import numpy as np
import torch

from flashdesk_ref import formats, ops
from flashdesk_ref.attention import window_slots

R = ops.Rounding()
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
TIES = os.path.join(REPO, "tests", "data", "torch_topk_ties.json")


def bf16_np(x):
    """numpy float32 -> nearest bf16 as float32 (formats.py's encoder, not quant.bf16)."""
    return formats.bf16_bits_to_f32(formats.f32_to_bf16_bits(np.asarray(x, dtype=np.float32)))


def kernel_walk(q, keys, valid, sink, scale):
    """One query head through the official kernel's loop, scalar numpy float32, written from
    kernel_cpu.sparse_attn's description: q [D], keys [N, D], valid [N], sink, scale."""
    f = np.float32
    acc = np.zeros(q.shape[0], dtype=f)
    den, m = f(0.0), f(-1e30)
    for b0 in range(0, len(keys), 64):
        s = [f(np.dot(q.astype(np.float64), keys[i].astype(np.float64))) * f(scale) if valid[i] else f(-np.inf)
             for i in range(b0, min(b0 + 64, len(keys)))]
        new = max(m, max(s))
        c = np.exp(f(m - new))
        p = [np.exp(f(si - new)) for si in s]
        den = f(den * c + f(sum(float(pi) for pi in p)))
        acc = (acc * c + sum(bf16_np(pi) * keys[b0 + i] for i, pi in enumerate(p))).astype(f)
        m = new
    den = f(den + np.exp(f(f(sink) - m)))
    return acc / den


class BlockedGemmTest(unittest.TestCase):
    def test_partials_per_block_of_32_added_in_k_order(self):
        # block 0: 2^24 + 1 rounds to 2^24 in its FP32 partial; block 1 adds 1, which rounds away
        # again. One correctly rounded sum over K would keep 2^24 + 2.
        x = torch.ones(1, 64)
        w = torch.zeros(1, 64)
        w[0, 0], w[0, 1], w[0, 32] = 2.0 ** 24, 1.0, 1.0
        self.assertEqual(R.block_mm(x, w).item(), 2.0 ** 24)
        self.assertEqual(R.mm(x, w.t()).item(), 2.0 ** 24 + 2)

    def test_a_partial_is_the_exactly_rounded_block_sum(self):
        # inside a block the oracle keeps its design (one rounding of the exact sum): 2^24 + 1 + 1
        x = torch.ones(1, 32)
        w = torch.zeros(1, 32)
        w[0, 0], w[0, 1], w[0, 2] = 2.0 ** 24, 1.0, 1.0
        self.assertEqual(R.block_mm(x, w).item(), 2.0 ** 24 + 2)

    def test_equals_the_plain_product_on_random_values_within_fp32_noise(self):
        g = torch.Generator().manual_seed(2)
        x, w = torch.randn(5, 96, generator=g), torch.randn(7, 96, generator=g)
        got = R.block_mm(x, w)
        want = (x.double() @ w.double().t()).float()
        self.assertLess((got - want).abs().max().item(), 1e-5)
        self.assertEqual(got.shape, (5, 7))


class SparseAttentionTest(unittest.TestCase):
    def test_matches_a_scalar_walk_of_the_official_kernel(self):
        g = torch.Generator().manual_seed(4)
        T, H, D, N = 3, 2, 16, 150                    # three blocks of the key list, the last partial
        q = torch.randn(T, H, D, generator=g)
        keys = R.bf16(torch.randn(T, N, D, generator=g))
        valid = torch.rand(T, N, generator=g) < 0.7
        valid[1, 64:128] = False                      # a whole block without a key
        sink = torch.tensor([0.3, 4.0])
        scale = torch.tensor(D ** -0.5)
        got = ops.sparse_attention(R, q, keys, valid, sink, scale)
        worst = 0.0
        for t in range(T):
            for h in range(H):
                want = kernel_walk(q[t, h].numpy(), keys[t].numpy(), valid[t].numpy(), float(sink[h]),
                                   float(scale))
                worst = max(worst, float(np.abs(got[t, h].numpy() - want).max() / np.abs(want).max()))
        self.assertLess(worst, 1e-6)
        # the rule is visible at this size: one softmax over the whole list with FP32 p (the old
        # rule) is far off
        l = torch.einsum("thd,tnd->thn", q, keys) * scale
        l = l.masked_fill(~valid[:, None, :], float("-inf"))
        mx = torch.maximum(l.amax(-1), sink)
        p = torch.exp(l - mx[..., None])
        plain = torch.einsum("thn,tnd->thd", p, keys) / (p.sum(-1) + torch.exp(sink - mx))[..., None]
        self.assertGreater(((plain - got).abs().amax((-1)) / got.abs().amax(-1)).max().item(), 100 * worst)

    def test_sink_enters_the_denominator_only(self):
        q = torch.tensor([[[1.0, 0.0]]])                  # [T=1, H=1, D=2]
        keys = torch.tensor([[[0.0, 1.0], [2.0, 3.0]]])
        valid = torch.tensor([[True, True]])
        for sink in (0.5, 30.0):                          # 30: far above every score
            o = ops.sparse_attention(R, q, keys, valid, torch.tensor([sink]), torch.tensor(1.0))
            p = [math.exp(-2.0), 1.0]                     # relative to the scores' max, 2
            num = [float(bf16_np(p[0])) * 0.0 + 2.0, float(bf16_np(p[0])) * 1.0 + 3.0]
            den = p[0] + p[1] + math.exp(sink - 2.0)
            for e in range(2):
                self.assertAlmostEqual(o[0, 0, e].item() / (num[e] / den), 1.0, places=6, msg=(sink, e))

    def test_probabilities_are_rounded_against_the_running_maximum(self):
        # block 0 holds one key of value and score 1, block 1 one of value and score 5: the first
        # p is bf16(exp(1 - 1)) = 1, rescaled later by exp(1 - 5) in FP32; rounding against the
        # final maximum would weigh it bf16(exp(-4))
        q = torch.tensor([[[1.0]]])
        keys = torch.zeros(1, 128, 1)
        keys[0, 0, 0], keys[0, 64, 0] = 1.0, 5.0
        valid = torch.zeros(1, 128, dtype=torch.bool)
        valid[0, 0] = valid[0, 64] = True
        o = ops.sparse_attention(R, q, keys, valid, torch.tensor([-100.0]), torch.tensor(1.0)).item()
        c = math.exp(-4.0)
        running = (c * 1.0 + 5.0) / (c + 1.0)
        final = (float(bf16_np(c)) * 1.0 + 5.0) / (c + 1.0)
        self.assertLess(abs(o - running), abs(running - final) / 10)

    def test_an_empty_block_changes_nothing(self):
        g = torch.Generator().manual_seed(6)
        q = torch.randn(2, 2, 8, generator=g)
        keys = R.bf16(torch.randn(2, 80, 8, generator=g))
        valid = torch.ones(2, 80, dtype=torch.bool)
        sink, scale = torch.tensor([0.1, -0.2]), torch.tensor(8 ** -0.5)
        a = ops.sparse_attention(R, q, keys, valid, sink, scale)
        # 64 empty slots ahead of the list keep every key in the same block
        keys_b = torch.cat((torch.randn(2, 64, 8, generator=g), keys), dim=1)
        valid_b = torch.cat((torch.zeros(2, 64, dtype=torch.bool), valid), dim=1)
        b = ops.sparse_attention(R, q, keys_b, valid_b, sink, scale)
        self.assertTrue(torch.equal(a, b))
        # 32 empty slots move keys across a block boundary: other bf16 roundings
        keys_c = torch.cat((torch.zeros(2, 32, 8), keys), dim=1)
        valid_c = torch.cat((torch.zeros(2, 32, dtype=torch.bool), valid), dim=1)
        self.assertFalse(torch.equal(a, ops.sparse_attention(R, q, keys_c, valid_c, sink, scale)))

    def test_no_valid_key_gives_zero(self):
        o = ops.sparse_attention(R, torch.ones(1, 2, 2), torch.ones(1, 3, 2), torch.zeros(1, 3, dtype=torch.bool),
                                 torch.zeros(2), torch.tensor(1.0))
        self.assertEqual(o.abs().sum().item(), 0.0)
        self.assertFalse(torch.isnan(o).any())


class WindowSlotsTest(unittest.TestCase):
    def test_slots_from_the_ring_and_the_step(self):
        W = 4
        ring = torch.tensor([4, 1, 2, 3])                 # slot = position % 4
        positions = torch.tensor([5, 6, 7])               # this step's rows 0..2 -> index 4..6
        index, valid = window_slots(positions, W, ring, 0)
        self.assertEqual(index.tolist(), [[2, 3, 0, 4], [3, 0, 4, 5], [0, 4, 5, 6]])
        self.assertTrue(bool(valid.all()))

    def test_empty_slots(self):
        index, valid = window_slots(torch.tensor([0, 1, 2]), 4, torch.full((4,), -1), 0)
        self.assertEqual(valid.tolist(), [[True, False, False, False], [True, True, False, False],
                                          [True, True, True, False]])
        self.assertEqual(index[2, :3].tolist(), [4, 5, 6])
        # a ring slot overwritten by a later position, and a bounded-replay start
        ring = torch.tensor([8, 5, 6, 7])
        _, valid = window_slots(torch.tensor([9]), 4, ring, 7)
        self.assertEqual(valid.tolist(), [[False, True, True, True]])   # 6 < window_start 7
        _, valid = window_slots(torch.tensor([9]), 4, torch.tensor([8, 1, 6, 7]), 0)
        self.assertEqual(valid.tolist(), [[True, True, True, True]])
        _, valid = window_slots(torch.tensor([10]), 4, torch.tensor([8, 1, 6, 3]), 0)
        # 7 and 9: their slots hold 3 and 1; 8 in the ring; 10 is the step's own row
        self.assertEqual(valid.tolist(), [[False, True, False, True]])


class TorchTopkTest(unittest.TestCase):
    def test_returns_torchs_indices_under_ties(self):
        with open(TIES) as f:
            data = json.load(f)
        ties_at_cut = 0
        for c in data["cases"]:
            v = torch.tensor([float("-inf") if isinstance(x, str) else x for x in c["values"]])
            k = c["k"]
            for sorted_, name in ((False, "unsorted"), (True, "sorted")):
                self.assertEqual(ops.torch_topk(v, k, sorted_).tolist(), c[name], (c["n"], k, name))
                rows = ops.torch_topk(torch.stack((v, v.flip(0), v)), k, sorted_)
                self.assertEqual(rows[2].tolist(), c[name])                 # row by row
            s = sorted(v.tolist(), reverse=True)
            ties_at_cut += k < len(s) and s[k - 1] == s[k]
        self.assertGreater(ties_at_cut, 60)   # the fixture is about ties at the cut

    def test_the_rows_width_decides_among_ties(self):
        # nth_element's choice depends on every element of the row: padding a tied row with -inf
        # (entries a query cannot see yet) changes the kept indices for some rows
        with open(TIES) as f:
            cases = json.load(f)["cases"]
        changed = 0
        for c in cases:
            v = torch.tensor([float("-inf") if isinstance(x, str) else x for x in c["values"]])
            wide = torch.cat((v, torch.full((3 * len(v),), float("-inf"))))
            a = sorted(ops.torch_topk(v, c["k"], False).tolist())
            b = sorted(ops.torch_topk(wide, c["k"], False).tolist())
            changed += a != b
        self.assertGreater(changed, 0)


if __name__ == "__main__":
    unittest.main()
