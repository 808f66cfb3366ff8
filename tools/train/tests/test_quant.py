"""Training quantisers (tools/train/quant.py): hand-computed values of docs/numerics.md, and
agreement with the engine's scalar quantisers (engine/util/quant.cpp, compiled here) on random
blocks; straight-through gradients."""
import os
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from helpers import REPO
from train import quant


def block32(values):
    x = torch.zeros(32)
    x[:len(values)] = torch.tensor(values, dtype=torch.float32)
    return x


class HandComputed(unittest.TestCase):
    def test_act_quant_scale_from_amax(self):
        # amax 3: 3 * fp32(1/448) = 0.0067 -> scale 2^-7; 3/2^-7 = 384 = 1.5*2^8 exact;
        # 0.01/2^-7 = 1.28 -> 1.25; -2.9/2^-7 = -371.2 -> -384 (step 32 in [256, 512)).
        q = quant.act_quant(block32([3.0, 1.0, 0.01, -2.9]))
        self.assertEqual(q[:4].tolist(), [3.0, 1.0, 1.25 * 2 ** -7, -3.0])

    def test_act_quant_ties_to_even_and_subnormals(self):
        # amax 448 -> scale 1. 1.0625 is halfway 1.0|1.125 -> 1.0 (even mantissa);
        # 1.1875 halfway 1.125|1.25 -> 1.25; 1.5*2^-9 halfway 2^-9|2^-8 -> 2^-8 (even step).
        q = quant.act_quant(block32([448.0, 1.0625, 1.1875, 1.5 * 2 ** -9, -1.0625]))
        self.assertEqual(q[:5].tolist(), [448.0, 1.0, 1.25, 2 ** -8, -1.0])

    def test_act_quant_all_zero_block(self):
        self.assertEqual(quant.act_quant(torch.zeros(32)).abs().sum().item(), 0.0)

    def test_fp4_e8m0_ties(self):
        # amax 6: 6 * fp32(1/6) rounds to 1.0 -> scale 1. Ties go to the even code:
        # 5 -> 4, 2.5 -> 2, 0.25 -> 0, 0.75 -> 1, 1.75 -> 2, -3.5 -> -4; 0.3 -> 0.5.
        q = quant.fp4_e8m0(block32([6.0, 5.0, 2.5, 0.25, 0.75, 1.75, -3.5, 0.3, 1.25]))
        self.assertEqual(q[:9].tolist(), [6.0, 4.0, 2.0, 0.0, 1.0, 2.0, -4.0, 0.5, 1.0])

    def test_fp4_e8m0_scale_rounds_up(self):
        # amax 7 -> 7/6 -> scale 2: 7/2 = 3.5 -> 4 -> 8; 1/2 = 0.5 -> 0.5 -> 1.
        q = quant.fp4_e8m0(block32([7.0, 1.0]))
        self.assertEqual(q[:2].tolist(), [8.0, 1.0])

    def test_fp4_e4m3_scale_is_e4m3(self):
        # amax 7: 7/6 = 1.1667 -> e4m3 1.125; 7/1.125 = 6.22 -> clamp 6 -> 6.75;
        # 1/1.125 = 0.889 -> 1 -> 1.125; 2.8125/1.125 = 2.5 (tie) -> 2 -> 2.25.
        x = torch.zeros(16)
        x[:3] = torch.tensor([7.0, 1.0, 2.8125])
        self.assertEqual(quant.fp4_e4m3(x, 16)[:3].tolist(), [6.75, 1.125, 2.25])

    def test_fp8_weight_tiles(self):
        # One scale per 32x32 tile. Tile 0 holds 448 -> scale 1: 0.0123 is subnormal,
        # 0.0123*512 = 6.30 -> 6/512. Tile 1: amax 0.0123 -> scale 2^-15: 0.0123*2^15 = 403.05
        # -> 416 (step 32 in [256, 512)) -> 416/2^15.
        w = torch.full((32, 64), 0.0123)
        w[0, 0] = 448.0
        q = quant.fp8_weight(w)
        self.assertEqual(q[5, 5].item(), 6 / 512)
        self.assertEqual(q[5, 40].item(), 416 / 2 ** 15)

    def test_e2m1_grid(self):
        a = torch.tensor([0.1, 0.3, 0.8, 1.3, 1.6, 2.2, 2.9, 3.6, 4.9, 5.2, 9.0])
        self.assertEqual(quant.round_e2m1(a).tolist(), [0, 0.5, 1, 1.5, 1.5, 2, 3, 4, 4, 6, 6])


class AgainstEngine(unittest.TestCase):
    """The engine's scalar quantisers on the same random blocks (several magnitudes)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.exe = os.path.join(cls.tmp, "quant_harness")
        src = [os.path.join(REPO, "engine/util", f) for f in ("quant.cpp", "numeric.cpp", "error.cpp")]
        subprocess.run(["g++", "-std=c++20", "-O1", "-I", REPO, "-o", cls.exe,
                        os.path.join(os.path.dirname(__file__), "quant_harness.cpp")] + src,
                       check=True)

    def engine(self, mode, block, x):
        src, dst = os.path.join(self.tmp, "in.bin"), os.path.join(self.tmp, "out.bin")
        x.astype(np.float32).tofile(src)
        subprocess.run([self.exe, mode, str(block), src, dst], check=True)
        return np.fromfile(dst, dtype=np.float32)

    def data(self, n):
        rng = np.random.default_rng(7)
        mags = 10.0 ** rng.uniform(-6, 4, size=(n // 32, 1))
        x = (rng.standard_normal((n // 32, 32)) * mags).astype(np.float32)
        x[::7, 3] = 0.0
        x[::11] = np.round(x[::11] * 8) / 8   # many exact ties
        return x.reshape(-1)

    def check(self, mode, block, fn):
        x = self.data(32 * 4096)
        want = self.engine(mode, block, x)
        got = fn(torch.from_numpy(x).view(-1, block), block).reshape(-1).numpy()
        bad = np.nonzero(got != want)[0]
        self.assertEqual(len(bad), 0, f"{mode}: {len(bad)} differ, first {x[bad[:3]]} "
                                      f"-> {got[bad[:3]]} vs {want[bad[:3]]}")

    def test_fp8(self):
        self.check("fp8", 32, quant.act_quant)

    def test_fp4_e8m0(self):
        self.check("fp4_e8m0", 32, quant.fp4_e8m0)

    def test_fp4_e4m3(self):
        self.check("fp4_e4m3", 16, quant.fp4_e4m3)

    def test_fp8_weight_tile_equals_engine_block_of_1024(self):
        rng = np.random.default_rng(3)
        w = (rng.standard_normal((64, 96)) * 0.05).astype(np.float32)
        tiles = w.reshape(2, 32, 3, 32).transpose(0, 2, 1, 3).reshape(-1)   # tile-major
        want = self.engine("fp8", 1024, tiles).reshape(2, 3, 32, 32).transpose(0, 2, 1, 3)
        got = quant.fp8_weight(torch.from_numpy(w)).numpy()
        np.testing.assert_array_equal(got, want.reshape(64, 96))


class StraightThrough(unittest.TestCase):
    def test_value_and_gradient(self):
        x = (torch.randn(4, 64) * 3).to(torch.bfloat16).requires_grad_()
        y = quant.act_quant_ste(x)
        self.assertEqual(y.dtype, torch.bfloat16)
        self.assertTrue(torch.equal(y.float(), quant.act_quant(x.detach())))
        (y.float() * torch.arange(64.0)).sum().backward()
        self.assertTrue(torch.equal(x.grad.float(), torch.arange(64.0).expand(4, 64)))


if __name__ == "__main__":
    unittest.main()


class AgainstOracle(unittest.TestCase):
    """The oracle's quantisers (tools/flashdesk_ref/quant.py), written independently."""

    def test_same_values(self):
        from flashdesk_ref import quant as oq
        g = torch.Generator().manual_seed(11)
        x = torch.randn(512, 64, generator=g) * torch.logspace(-5, 3, 512).unsqueeze(1)
        for mine, theirs, block in ((quant.act_quant, oq.act_quant, 32),
                                    (quant.fp4_e8m0, oq.fp4_e8m0, 32),
                                    (quant.fp4_e4m3, oq.fp4_e4m3, 16)):
            self.assertTrue(torch.equal(mine(x, block), theirs(x, block)), mine.__name__)
