"""The trainer's DSpark head (train/dspark_head.py) against the oracle's transcription of the
official forward_spec (flashdesk_ref/dspark.py) on a random head over flash-tiny, and the export
round trip (train/dspark_export.py)."""
import json
import os
import tempfile
import unittest

import numpy as np
import torch

from helpers import REPO  # noqa: F401  (puts tools/ on sys.path)

from flashdesk_ref.checkpoint import Checkpoint
from flashdesk_ref.dspark import Draft
from flashdesk_ref.model import Model
from flashdesk_ref.safetensors import SafeTensorsFile
from train.config import load_model_config
from train.dspark_export import (HEAD_FILES, SHARD, head_tensors, install, load_head, ship,
                                 target_tensor_bytes, write_head)
from train.dspark_head import DsparkConfig, DsparkHead
from train.dspark_train import batch_labels
from train.numerics import Numerics

TINY = os.path.join(REPO, "assets", "models", "flash-tiny")


def random_head(seed=0):
    torch.manual_seed(seed)
    cfg = load_model_config(TINY)
    head = DsparkHead(cfg, DsparkConfig(5, 3, (9, 10, 11), 32, None, 3,
                                        cfg.raw["text_config"]["dspark_noise_token_id"]))
    with torch.no_grad():   # mHC mixes and gate biases away from their neutral starts
        for st in head.stages:
            for sub in ("hc_attn", "hc_ffn"):
                getattr(st, sub + "_fn").normal_(0, 0.05)
                getattr(st, sub + "_base").add_(torch.randn_like(getattr(st, sub + "_base")))
            st.ffn.gate.bias.normal_(0, 0.1)
            st.attn.attn_sink.normal_(0, 1.0)
        head.stages[-1].markov_head.head.weight.normal_(0, 0.3)
        head.stages[-1].confidence_head.proj.weight.normal_(0, 0.1)
    return cfg, head


class DsparkHeadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cfg, cls.head = random_head()
        cls.head_dir = os.path.join(cls.tmp.name, "head")
        cls.model_dir = os.path.join(cls.tmp.name, "model")
        write_head(cls.head, TINY, cls.head_dir)
        install(cls.head_dir, TINY, cls.model_dir, link=True)
        load_head(cls.head, cls.model_dir)   # the exported (quantised) values, as the oracle reads
        cls.ckpt = Checkpoint(cls.model_dir)
        cls.oracle = Model(cls.ckpt)
        cls.draft = Draft(cls.ckpt, cls.oracle)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_drafts_equal_the_official_forward(self):
        """Same target features in: equal draft ids, corrected logits and confidence within
        FP32 summation noise. P = 23 (ring not full) and P = 135 (the ring wrapped: slot order
        differs from position order), eight prompts each. A quantiser's rounding tie broken the
        other way in one path moves every later value by a step (measured on the 2470-step
        flash-tiny: 3 of the 16 prompts, logits 0.05-0.19 apart, the other 13 within 2e-6), so
        most prompts must agree to noise and every one within a few such steps; a real
        difference between the two forwards would move them all."""
        num = Numerics(emulate_fp32=True, block=self.cfg.weight_block)
        embed, head_w = self.ckpt["embed.weight"].float(), self.ckpt["head.weight"].float()
        within_noise, cases = 0, 0
        for seed in range(8):
            rng = np.random.default_rng(seed)
            for P in (23, 135):
                prompt = [int(v) for v in rng.integers(3, 8000, size=P)]
                features = self.draft.record(self.oracle)
                state, rings = self.oracle.new_state(), self.draft.new_rings()
                logits = self.oracle.step(state, prompt)
                f = features.take()
                self.draft.seed(rings, f, 0)
                last = int(torch.argmax(logits[-1]))
                tokens, ref_logits, ref_conf = self.draft.draft(rings, P, last)
                ids = torch.tensor(prompt + [last])
                feats = torch.cat((f, torch.zeros(1, f.shape[1])))
                got, got_logits, got_conf = self.head.greedy(num, embed, head_w, feats, ids, P)
                self.assertEqual(got, tokens, f"seed {seed}, P={P}")
                logit_diff = float((got_logits - ref_logits).abs().max())
                conf_diff = float((got_conf - ref_conf).abs().max())
                print(f"seed {seed}, P={P}: drafts {got}, max |logit diff| {logit_diff:.3g}, "
                      f"max |confidence diff| {conf_diff:.3g}")
                self.assertLess(logit_diff, 0.5, f"seed {seed}, P={P}")
                self.assertLess(conf_diff, 0.5, f"seed {seed}, P={P}")
                within_noise += logit_diff < 1e-4 and conf_diff < 1e-4
                cases += 1
                # a different draft would show: the logits move by far more than the tolerance
                self.assertGreater(float(ref_logits.std()), 0.5)
        self.assertGreaterEqual(within_noise, cases * 3 // 4)

    def test_export_round_trips(self):
        """write -> load -> write gives the same bytes for every tensor; the shard holds exactly
        the mtp.* tensors the index maps to it; the config has the stages' keys."""
        again = DsparkHead(self.cfg, self.head.dcfg)
        load_head(again, self.model_dir)
        a, b = head_tensors(self.head), head_tensors(again)
        self.assertEqual(sorted(a), sorted(b))
        for n in a:
            self.assertEqual(a[n][0], b[n][0], n)
            self.assertTrue(np.array_equal(a[n][1], b[n][1]), n)
        with open(os.path.join(self.model_dir, "model.safetensors.index.json")) as f:
            wm = json.load(f)["weight_map"]
        in_shard = sorted(n for n, s in wm.items() if s == SHARD)
        self.assertEqual(in_shard, sorted(a))
        self.assertTrue(all(n.startswith("mtp.") for n in in_shard))
        self.assertEqual(sorted(SafeTensorsFile(os.path.join(self.model_dir, SHARD)).names()), in_shard)
        self.assertIn("mtp.0.main_proj.scale", in_shard)
        self.assertIn("mtp.2.ffn.experts.7.w2.weight", in_shard)
        with open(os.path.join(self.model_dir, "config.json")) as f:
            t = json.load(f)["text_config"]
        self.assertEqual(t["num_nextn_predict_layers"], 3)
        self.assertEqual(t["dspark_target_layer_ids"], [9, 10, 11])
        self.assertEqual(len(t["compress_ratios"]), t["num_hidden_layers"] + 3)

    def test_ship_into_the_target_itself(self):
        """ship(): the head's shard and config in the target directory, the index with the main
        tensors' entries unchanged plus the head's, total_size the data bytes of both; the head
        loads back to the same codes; shipping it again (over a shipped head) changes nothing."""
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "target")
            os.makedirs(target)
            for name in os.listdir(TINY):   # the target's files; the head's as links (the
                src = os.path.join(TINY, name)   # repository's own head must not be written)
                os.symlink(src, os.path.join(target, name))
            with open(os.path.join(TINY, "model.safetensors.index.json")) as f:
                tiny_wm = json.load(f)["weight_map"]
            ship(self.head_dir, target)
            for name in HEAD_FILES:
                self.assertFalse(os.path.islink(os.path.join(target, name)), name)
            with open(os.path.join(TINY, "model.safetensors.index.json")) as f:
                self.assertEqual(json.load(f)["weight_map"], tiny_wm)   # TINY untouched
            with open(os.path.join(target, "model.safetensors.index.json")) as f:
                index = json.load(f)
            main = {n: s for n, s in tiny_wm.items() if not n.startswith("mtp.")}
            a = head_tensors(self.head)
            self.assertEqual(index["weight_map"], {**main, **{n: SHARD for n in a}})
            self.assertEqual(index["metadata"]["total_size"], target_tensor_bytes(target, main)
                             + sum(arr.nbytes for _, arr in a.values()))
            with open(os.path.join(self.head_dir, SHARD), "rb") as f1, \
                    open(os.path.join(target, SHARD), "rb") as f2:
                self.assertEqual(f1.read(), f2.read())
            again = DsparkHead(self.cfg, self.head.dcfg)
            load_head(again, target)
            b = head_tensors(again)
            self.assertTrue(all(np.array_equal(a[n][1], b[n][1]) for n in a))
            before = {n: open(os.path.join(target, n), "rb").read() for n in HEAD_FILES}
            ship(self.head_dir, target)
            self.assertEqual({n: open(os.path.join(target, n), "rb").read()
                              for n in HEAD_FILES}, before)

    def test_ship_refuses_a_head_of_another_target(self):
        """A head whose main config differs from the target's is refused, naming the file, and
        the target keeps its files."""
        with tempfile.TemporaryDirectory() as tmp:
            head = os.path.join(tmp, "head")
            os.makedirs(head)
            for name in HEAD_FILES:
                os.symlink(os.path.join(self.head_dir, name), os.path.join(head, name))
            os.remove(os.path.join(head, "config.json"))
            with open(os.path.join(self.head_dir, "config.json")) as f:
                raw = json.load(f)
            raw["text_config"]["moe_intermediate_size"] += 32
            with open(os.path.join(head, "config.json"), "w") as f:
                json.dump(raw, f)
            target = os.path.join(tmp, "target")
            os.makedirs(target)
            for name in ("config.json", "model.safetensors.index.json"):
                with open(os.path.join(TINY, name), "rb") as f, \
                        open(os.path.join(target, name), "wb") as g:
                    g.write(f.read())
            with self.assertRaisesRegex(ValueError, "config.json: the main model's keys"):
                ship(head, target)
            self.assertFalse(os.path.exists(os.path.join(target, SHARD)))
            with open(os.path.join(TINY, "config.json"), "rb") as f, \
                    open(os.path.join(target, "config.json"), "rb") as g:
                self.assertEqual(f.read(), g.read())

    def test_labels_follow_the_greedy_path(self):
        """Row i is trained only where ids[P+1..P+i] are the target's greedy picks."""
        ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
        # the target would follow ids[..2] with 99, not ids[3] = 8: row 1 (the token after 7)
        # is still its greedy continuation, rows 2-4 (after the data's 8) are not
        greedy = torch.tensor([[6, 7, 99, 9, 10, 11, 12, 13]])
        labels, markov, on_path = batch_labels(ids, greedy, torch.tensor([[1]]), 5)
        self.assertEqual(labels.tolist(), [[[7, 99, 9, 10, 11]]])
        self.assertEqual(markov.tolist(), [[[6, 7, 99, 9, 10]]])
        self.assertEqual(on_path.tolist(), [[[True, True, False, False, False]]])


if __name__ == "__main__":
    unittest.main()
