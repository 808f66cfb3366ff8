"""Numerics.qmm: FP8/FP4 linears summed as the official GEMM (an FP32 partial per K-block of 32,
the partials added in K order), its shapes and gradients, and when it applies."""
import unittest

import torch

import helpers  # noqa: F401  (sys.path)
from train.numerics import Numerics


class BlockedLinear(unittest.TestCase):
    def test_partials_per_block_of_32_added_in_k_order(self):
        # block 0 sums to 2^24 + 1, which its FP32 partial rounds to 2^24; block 1 adds 1, which
        # rounds away again (one sum over K could keep 2^24 + 2)
        x = torch.ones(1, 64)
        w = torch.zeros(1, 64)
        w[0, 0], w[0, 1], w[0, 32] = 2.0 ** 24, 1.0, 1.0
        self.assertEqual(Numerics(emulate_fp32=True).qmm(x, w).item(), 2.0 ** 24)
        want = (x.double() @ w.double().t()).item()
        self.assertEqual(want, 2.0 ** 24 + 2)

    def test_shapes_broadcast_and_gradients(self):
        num = Numerics(emulate_fp32=True)
        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 5, 64, generator=g, requires_grad=True)
        w = torch.randn(3, 64, generator=g, requires_grad=True)
        y = num.qmm(x, w)                                   # [2, 5, 3]
        torch.testing.assert_close(y, x @ w.t(), rtol=1e-5, atol=1e-5)
        y.sum().backward()
        torch.testing.assert_close(w.grad, x.detach().sum((0, 1)).expand(3, 64), rtol=1e-5, atol=1e-5)
        a, wb = torch.randn(4, 6, 32, generator=g), torch.randn(4, 7, 32, generator=g)
        torch.testing.assert_close(num.qmm(a, wb), torch.bmm(a, wb.transpose(1, 2)), rtol=1e-5, atol=1e-5)

    def test_applies_with_qat_and_the_setting(self):
        self.assertTrue(Numerics(emulate_fp32=True).blocked)
        self.assertFalse(Numerics(emulate_fp32=False).blocked)          # the GPU's BF16 default
        self.assertTrue(Numerics(emulate_fp32=False, blocked=True).blocked)
        with self.assertRaisesRegex(ValueError, "multiple of 32"):
            Numerics(emulate_fp32=True).qmm(torch.ones(1, 40), torch.ones(2, 40))
        plain = Numerics(emulate_fp32=True, qat=False)                    # before QAT: one product
        self.assertEqual(plain.qmm(torch.ones(1, 40), torch.ones(2, 40)).tolist(), [[40.0, 40.0]])


if __name__ == "__main__":
    unittest.main()
