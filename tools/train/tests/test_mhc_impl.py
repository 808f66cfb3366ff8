"""mHC collapse/expand: the batched-product implementation ("matmul") gives the values and
gradients of the per-stream loop ("loop") up to FP32 summation order, alone and in a model."""
import unittest

import torch

from helpers import micro_config, random_samples, stand_in_hasher
from train import mhc
from train.batch import collate
from train.model import Transformer
from train.numerics import Numerics
from train.objective import Phase, batch_losses

BF16_STEP = 2.0 ** -8  # relative spacing of bf16 values


def bf16_values(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).to(torch.bfloat16).to(torch.float32)


class MhcImplTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.num = Numerics(emulate_fp32=True)
        B, N, hc, D = 2, 9, 4, 64
        self.X = bf16_values(B, N, hc, D)
        self.y = bf16_values(B, N, D)
        fn = torch.randn((2 + hc) * hc, hc * D) * 0.05
        base = torch.zeros((2 + hc) * hc)
        self.pre, self.post, self.comb = mhc.hc_mixes(self.X, fn, base, torch.ones(3), 20, 1e-6, 1e-6)

    def assert_same_up_to_summation_order(self, a, b):
        diff = (a - b).abs()
        # after the bf16 rounding, a different FP32 summation order moves a value by one bf16 step at most
        self.assertTrue(bool((diff <= BF16_STEP * b.abs().clamp_min(1e-30) * 1.01).all()))
        self.assertLess((diff > 0).float().mean().item(), 0.01)

    def test_collapse_values_and_gradients(self):
        outs, grads = [], []
        for impl in mhc.IMPLS:
            X, pre = self.X.clone().requires_grad_(), self.pre.clone().requires_grad_()
            out = mhc.collapse(self.num, X, pre, impl)
            out.backward(torch.ones_like(out) * torch.linspace(-1, 1, out.shape[-1]))
            outs.append(out.detach())
            grads.append((X.grad, pre.grad))
        self.assert_same_up_to_summation_order(outs[1], outs[0])
        for g_matmul, g_loop in zip(grads[1], grads[0]):
            torch.testing.assert_close(g_matmul, g_loop, rtol=1e-2, atol=1e-4)

    def test_expand_values_and_gradients(self):
        outs, grads = [], []
        for impl in mhc.IMPLS:
            leaves = [t.clone().requires_grad_() for t in (self.X, self.y, self.post, self.comb)]
            out = mhc.expand(self.num, *leaves, impl)
            out.backward(torch.ones_like(out) * torch.linspace(-1, 1, out.shape[-1]))
            outs.append(out.detach())
            grads.append([t.grad for t in leaves])
        self.assertEqual(outs[1].shape, self.X.shape)
        self.assert_same_up_to_summation_order(outs[1], outs[0])
        for g_matmul, g_loop in zip(grads[1], grads[0]):
            torch.testing.assert_close(g_matmul, g_loop, rtol=1e-2, atol=1e-4)

    def test_expanded_first_streams_work(self):
        """The first block's streams are one embedding expanded (stride 0 over hc)."""
        X = self.X[:, :, :1].expand_as(self.X)
        a = mhc.expand(self.num, X, self.y, self.post, self.comb, "matmul")
        b = mhc.expand(self.num, X.contiguous(), self.y, self.post, self.comb, "matmul")
        torch.testing.assert_close(a, b, rtol=0, atol=0)

    def test_model_losses_agree(self):
        cfg = micro_config()
        batch = collate(random_samples(2, 40, 60, 500, seed=5), cfg.sliding_window, cfg.sliding_window,
                        [False, True])
        losses = []
        for impl in mhc.IMPLS:
            torch.manual_seed(0)
            model = Transformer(cfg)
            model.set_mhc_impl(impl)
            out = batch_losses(model, self.num, batch, Phase(distill=True), stand_in_hasher(cfg))
            losses.append(out["ce_sum"].item() / out["n_tokens"])
        # Through a randomly initialised model, bf16 rounding flips and the top-k choices they move
        # add up: measured 0.16% apart; comb used untransposed (a wiring slip) is 0.77% apart.
        self.assertAlmostEqual(losses[1], losses[0], delta=4e-3 * abs(losses[0]))

    def test_unknown_impl_is_refused(self):
        with self.assertRaisesRegex(ValueError, "mhc_impl"):
            Transformer(micro_config()).set_mhc_impl("fused")


if __name__ == "__main__":
    unittest.main()
