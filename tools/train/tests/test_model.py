"""Whole-model properties on the every-role layout (micro widths, FP32 emulation): causality, decoder bounded
replay (equal to exact when P <= W; isolated from the decoder's pre-tail states when P > W),
gradients reaching every parameter."""
import unittest

import torch

from helpers import micro_config, random_samples, stand_in_hasher
from train.batch import collate
from train.model import Transformer
from train.numerics import Numerics
from train.objective import Phase, batch_losses, make_context


def all_logits(model, num, batch, hasher, phase=Phase()):
    with torch.no_grad():
        ctx = make_context(model, batch, phase, hasher)
        return model.logits(num, model(num, batch, ctx))


class ModelProperties(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.cfg = micro_config()
        cls.model = Transformer(cls.cfg).eval()
        cls.num = Numerics(emulate_fp32=True)
        cls.hasher = stand_in_hasher(cls.cfg)
        cls.W = cls.cfg.sliding_window

    def test_causal(self):
        s = random_samples(1, 60, 61, 500, seed=1)
        b0 = collate(s, self.W, self.W, [False])
        b1 = collate(s, self.W, self.W, [False])
        c = 37
        b1.ids[0, c] = (b1.ids[0, c] + 5) % 500
        l0 = all_logits(self.model, self.num, b0, self.hasher)
        l1 = all_logits(self.model, self.num, b1, self.hasher)
        torch.testing.assert_close(l0[0, :c], l1[0, :c], rtol=0, atol=1e-6)
        self.assertGreater((l0[0, c:] - l1[0, c:]).abs().max().item(), 1e-3)

    def test_bounded_equals_exact_when_prompt_fits_window(self):
        s = random_samples(2, 40, 50, 500, seed=2, answer_frac=0.3)   # P <= 15 < W = 16
        ex = collate(s, self.W, self.W, [False, False])
        bd = collate(s, self.W, self.W, [True, True])
        self.assertTrue(all(p <= self.W for p in bd.answer_start.tolist()))
        bd.bounded_start = bd.answer_start - bd.answer_start.clamp(max=self.W)  # s = 0 path
        torch.testing.assert_close(all_logits(self.model, self.num, ex, self.hasher),
                                   all_logits(self.model, self.num, bd, self.hasher), rtol=0, atol=0)

    def test_bounded_tail_ignores_decoder_states_before_start(self):
        s = random_samples(1, 70, 71, 500, seed=3, answer_frac=0.6)
        bd = collate(s, self.W, self.W, [True])
        st = int(bd.bounded_start[0])
        self.assertGreater(st, 0)
        ref = all_logits(self.model, self.num, bd, self.hasher)
        first = self.cfg.decoder_first_layer

        def perturb(module, args):
            X = args[1].clone()
            X[:, :st] += torch.randn_like(X[:, :st])
            return (args[0], X) + tuple(args[2:])

        hooks = [blk.register_forward_pre_hook(perturb) for blk in self.model.layers[first + 1:]]
        try:
            got = all_logits(self.model, self.num, bd, self.hasher)
        finally:
            for h in hooks:
                h.remove()
        torch.testing.assert_close(got[0, st:], ref[0, st:], rtol=0, atol=1e-5)
        self.assertGreater((got[0, :st] - ref[0, :st]).abs().max().item(), 1e-3)

    def test_every_parameter_gets_a_gradient(self):
        model = Transformer(self.cfg).train()
        b = collate(random_samples(2, 40, 60, 500, seed=4), self.W, self.W, [False, True])
        out = batch_losses(model, self.num, b, Phase(), self.hasher)
        (out["ce_sum"] / out["n_tokens"] + out["kl"] + out["balance"]).backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
        self.assertEqual(missing, [])



class MoeImplementations(unittest.TestCase):
    def test_dense_equals_sorted(self):
        torch.manual_seed(0)
        cfg = micro_config()
        model = Transformer(cfg).train()
        num = Numerics(emulate_fp32=True)
        b = collate(random_samples(2, 30, 50, 500, seed=6), 16, 16, [False, False])
        outs, grads = [], []
        for impl in ("sorted", "dense"):
            model.set_moe_impl(impl)
            model.zero_grad()
            out = batch_losses(model, num, b, Phase(), stand_in_hasher(cfg))
            out["ce_sum"].backward()
            outs.append(float(out["ce_sum"]))
            grads.append(model.layers[3].ffn.experts_w2.grad.clone())
        self.assertAlmostEqual(outs[0], outs[1], delta=1e-3 * abs(outs[0]))
        torch.testing.assert_close(grads[0], grads[1], rtol=1e-3, atol=1e-5)


if __name__ == "__main__":
    unittest.main()
