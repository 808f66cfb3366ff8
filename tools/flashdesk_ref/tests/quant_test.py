"""Torch quantisers against hand values (the same as tests/engine/numeric_test.cpp) and against
the independent numpy encoders of formats.py."""
import unittest

import numpy as np
import torch

from flashdesk_ref import formats, quant


def t(*values):
    return torch.tensor(values, dtype=torch.float32)


class RoundingTest(unittest.TestCase):
    def test_bf16_ties_to_even(self):
        self.assertEqual(quant.bf16(t(1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -1 - 3 * 2 ** -8)).tolist(),
                         [1.0, 1.0, 1 + 2 ** -7 * 2, -(1 + 2 ** -7 * 2)])

    def test_e4m3_ties_and_saturation(self):
        got = quant.e4m3(t(1.0625, 1.1875, 1.5 * 2 ** -9, 15.5, 448.0, -1.1875))
        self.assertEqual(got.tolist(), [1.0, 1.25, 2 * 2 ** -9, 16.0, 448.0, -1.25])

    def test_e2m1_table(self):
        got = quant.e2m1(t(0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 0.3, -2.9))
        self.assertEqual(got.tolist(), [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 0.5, -3.0])

    def test_pow2_ceil_on_bits(self):
        self.assertEqual(quant.pow2_ceil(t(1.0, 1.5, 0.25, 3.0)).tolist(), [1.0, 2.0, 0.25, 4.0])

    def test_torch_and_numpy_encoders_agree(self):
        # two independent implementations: bit tricks (torch) and table search (numpy)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(20000, generator=g) * torch.exp2(torch.randint(-12, 9, (20000,), generator=g).float())
        x = x.clamp(-448, 448)
        mids = torch.from_numpy((formats.E4M3_TABLE[1:126] + formats.E4M3_TABLE[2:127]) / 2)
        x = torch.cat((x, mids, -mids))
        want = formats.E4M3_TABLE[formats.f32_to_e4m3_codes(x.numpy())]
        np.testing.assert_array_equal(quant.e4m3(x).numpy(), want)
        y = (torch.rand(20000, generator=g) - 0.5) * 13
        y = torch.cat((y, t(0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)))
        np.testing.assert_array_equal(quant.e2m1(y).numpy(), formats.E2M1_TABLE[formats.f32_to_e2m1_codes(y.numpy())])
        z = torch.randn(20000, generator=g) * 100
        np.testing.assert_array_equal(quant.bf16(z).numpy(),
                                      formats.bf16_bits_to_f32(formats.f32_to_bf16_bits(z.numpy())))


class BlockQuantTest(unittest.TestCase):
    def test_fp8_scale_is_ceil_power_of_two(self):
        x = torch.zeros(32)
        x[0], x[1], x[2] = 900.0, -3.0, 5.0     # amax/448 = 2.0089 -> scale 4; 225 -> 224
        self.assertEqual(quant.act_quant(x)[:3].tolist(), [896.0, -3.0, 5.0])

    def test_fp8_zero_block_uses_the_floor(self):
        self.assertEqual(quant.act_quant(torch.zeros(32)).abs().sum().item(), 0.0)
        x = torch.zeros(32)
        x[0] = 1e-6      # below the 1e-4 floor: scale 2^ceil(log2(1e-4/448)) = 2^-22
        self.assertEqual(quant.act_quant(x)[0].item(), quant.e4m3(t(1e-6 * 2 ** 22)).item() * 2 ** -22)

    def test_fp8_blocks_are_independent(self):
        x = torch.ones(64)
        x[40] = 300.0   # only the second block's scale grows
        y = quant.act_quant(x)
        self.assertEqual(y[:32].tolist(), [1.0] * 32)
        self.assertEqual(y[41].item(), 1.0)

    def test_fp4_e8m0(self):
        x = torch.zeros(32)
        x[0], x[1], x[2] = 12.0, 2.5, -7.0      # scale 2: 6 -> 12, 1.25 -> 1 -> 2, -3.5 -> -4 -> -8
        self.assertEqual(quant.fp4_e8m0(x)[:3].tolist(), [12.0, 2.0, -8.0])

    def test_fp4_e4m3_scale_is_rounded_to_e4m3(self):
        x = torch.zeros(16)
        x[0], x[1] = 7.0, 1.0                   # amax/6 = 1.1667 -> 1.125; 6.22 -> 6; 0.889 -> 1
        self.assertEqual(quant.fp4_e4m3(x)[:2].tolist(), [6.75, 1.125])

    def test_dequantised_values_are_exact_in_bf16(self):
        x = torch.randn(4, 128) * 7
        for fn in (quant.act_quant, quant.fp4_e8m0, quant.fp4_e4m3):
            y = fn(x)
            self.assertTrue(torch.equal(quant.bf16(y), y), fn.__name__)

    def test_ste_forward_equals_quantiser_and_gradient_is_identity(self):
        x = (torch.randn(2, 64) * 3).requires_grad_()
        y = quant.act_quant_ste(x)
        self.assertTrue(torch.equal(y.detach(), quant.act_quant(x.detach())))
        y.sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.ones_like(x)))


if __name__ == "__main__":
    unittest.main()
