"""Training loop: a few steps reduce the loss; resume round trips (full state: the next step is
bit-identical; compact: the forward loss equals the original's with the compact rounding);
the data stream is a function of (seed, step)."""
import os
import shutil
import tempfile
import unittest

import numpy as np
import torch

from helpers import micro_config, stand_in_hasher
from train import resume as rs
from train.data import StepStream
from train.loop import Trainer
from train.model import Transformer
from train.numerics import Numerics
from train.objective import Phase, batch_losses
from train.batch import collate
from train.settings import load_settings

SETTINGS = dict(task_source="toy", tasks={"copy": 1.0, "recall": 1.0, "add": 1.0, "image": 0.5},
                task_options={"recall_distance": [20, 40]}, step_tokens=600, micro_tokens=1024,
                pad_multiple=16, lr=3e-3, warmup_steps=2, total_steps=50, qat_start_step=2,
                dense_steps=2, dense_max_len=96, max_len=128, eval_every=0, workers=0,
                checkpoint=dict(attention=True, experts=True, mixes=True), log_every=1000)


def make_trainer(seed=0, out=None, **extra):
    torch.manual_seed(seed)
    cfg = micro_config(vision=True)
    s = load_settings(None, dict(SETTINGS, **extra))
    model = Transformer(cfg)
    return Trainer(model, Numerics(emulate_fp32=True), stand_in_hasher(cfg), s,
                   torch.device("cpu"), out)


def stream_for(tr, start):
    s = tr.s
    names = list(s["tasks"])
    return StepStream("toy", tr.model.cfg, s["task_options"], names,
                      [s["tasks"][t] for t in names], s["seed"], s["step_tokens"], start, 0)


class Training(unittest.TestCase):
    def test_steps_reduce_loss_on_a_fixed_batch(self):
        tr = make_trainer(lr=5e-3, warmup_steps=1)
        _, samples = stream_for(tr, 0).get()
        losses = [tr.train_step(5, samples)["ce"] for _ in range(8)]   # step 5: QAT on, sparse
        self.assertLess(losses[-1], 0.8 * losses[0], losses)

    def test_stream_is_a_function_of_seed_and_step(self):
        tr = make_trainer()
        a = stream_for(tr, 3).get()
        b = stream_for(tr, 0)
        for _ in range(4):
            last = b.get()
        self.assertEqual(a[0], last[0])
        self.assertEqual([list(x.ids) for x in a[1]], [list(x.ids) for x in last[1]])


class Resume(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def trained(self, steps=3):
        tr = make_trainer()
        st = stream_for(tr, 0)
        for _ in range(steps):
            step, samples = st.get()
            tr.train_step(step, samples)
            tr.step += 1
        return tr, st

    def test_full_state_next_step_identical(self):
        a, st = self.trained()
        path = os.path.join(self.tmp, "full.pt")
        rs.save_full(path, a.model, a.opt, a.state())
        b = make_trainer(seed=99)
        self.assertEqual(b.restore(None, path), "full")
        self.assertEqual(b.step, a.step)
        step, samples = st.get()
        ra, rb = a.train_step(step, samples), b.train_step(step, samples)
        self.assertEqual(ra["ce"], rb["ce"])
        for (n, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters()):
            self.assertTrue(torch.equal(p, q), n)

    def test_compact_round_trip(self):
        a, st = self.trained()
        d = os.path.join(self.tmp, "compact")
        a.s["save_moments"] = True
        a.save(d)
        self.assertTrue(all(os.path.getsize(os.path.join(d, f)) <= rs.FILE_LIMIT for f in os.listdir(d)))
        b = make_trainer(seed=99)
        self.assertTrue(b.restore(d).startswith("compact"))
        self.assertEqual((b.step, b.tokens), (a.step, a.tokens))
        self.assertEqual(b.train_rows, a.train_rows)
        # A's weights with the compact rounding give B's forward exactly (biases included).
        sd = {n: (t if rs._keep_f32(n, t) else t.to(torch.bfloat16).float())
              for n, t in a.model.state_dict().items()}
        a.model.load_state_dict(sd)
        step, samples = st.get()
        b_ = collate(samples, 16, 16, [False] * len(samples))
        num = Numerics(emulate_fp32=True)
        with torch.no_grad():
            la = batch_losses(a.model, num, b_, Phase(), a.hasher)["ce_sum"]
            lb = batch_losses(b.model, num, b_, Phase(), b.hasher)["ce_sum"]
        self.assertEqual(float(la), float(lb))
        # 8-bit moments restored close to the originals
        pa = dict(a.model.named_parameters())["layers.3.attn.wq_b.weight"]
        pb = dict(b.model.named_parameters())["layers.3.attn.wq_b.weight"]
        ma, mb = a.opt.state[pa]["exp_avg"], b.opt.state[pb]["exp_avg"]
        self.assertLess(float((ma - mb).abs().max()), float(ma.abs().max()) / 100)

    def test_compact_without_moments_rewarms(self):
        a, _ = self.trained(2)
        d = os.path.join(self.tmp, "compact")
        a.save(d)
        b = make_trainer(seed=99)
        self.assertIn("re-warm", b.restore(d))
        self.assertEqual(b.rewarm_from, 2)

    def test_run_checkpoints_during_the_run(self):
        tr = make_trainer()
        saved = []
        tr.run(600, max_steps=3, log=lambda m: None, checkpoint_s=1e-9,
               checkpoint=lambda: saved.append(tr.step))
        self.assertEqual(saved, [1, 2, 3])


if __name__ == "__main__":
    unittest.main()
