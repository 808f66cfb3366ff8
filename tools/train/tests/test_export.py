"""Export: tensor names, dtypes and shapes equal those of the oracle's independent random
checkpoint writer for the same config; the oracle loads the directory; export -> import gives
the same logits bit for bit; shards stay under the file limit."""
import os
import shutil
import tempfile
import unittest

import torch

from helpers import micro_config, random_samples, stand_in_hasher
from train import export
from train.batch import collate
from train.model import Transformer
from train.numerics import Numerics
from train.objective import Phase, make_context


def logits(model, num, batch, hasher):
    with torch.no_grad():
        ctx = make_context(model, batch, Phase(cpu_topk=True), hasher)
        return model.logits(num, model(num, batch, ctx))


class Export(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        torch.manual_seed(3)
        cls.cfg = micro_config()
        cls.model = Transformer(cls.cfg).eval()
        for moe in cls.model.moe_layers():                 # non-trivial routing biases
            moe.gate.bias.normal_()
            moe.gate.bias_vl.normal_()
        cls.hasher = stand_in_hasher(cls.cfg)
        cls.dir = os.path.join(cls.tmp, "model")
        export.export_model(cls.model, cls.cfg, cls.dir, hasher=cls.hasher)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_names_dtypes_shapes_match_oracle_writer(self):
        import json
        from flashdesk_ref.random_checkpoint import write_random_checkpoint
        from flashdesk_ref.safetensors import SafeTensorsFile
        cfg_path = os.path.join(self.tmp, "config.json")
        with open(cfg_path, "w") as f:
            json.dump(self.cfg.raw, f)
        ref_dir = os.path.join(self.tmp, "random")
        write_random_checkpoint(cfg_path, ref_dir)
        ref = SafeTensorsFile(os.path.join(ref_dir, "model.safetensors"))
        want = {n: (ref.dtype(n), ref.shape(n)) for n in ref.names()}
        got = {n: (d, tuple(a.shape)) for n, (d, a) in
               export.checkpoint_tensors(self.model, self.cfg.weight_block).items()}
        self.assertEqual(sorted(set(want) ^ set(got)), [])
        for n in want:
            self.assertEqual(got[n], want[n], n)

    def test_import_round_trip_logits_identical(self):
        fresh = Transformer(self.cfg).eval()
        export.import_model(fresh, self.dir)
        num = Numerics(emulate_fp32=True)
        b = collate(random_samples(2, 40, 60, 500, seed=9), 16, 16, [False, True])
        torch.testing.assert_close(logits(fresh, num, b, self.hasher),
                                   logits(self.model, num, b, self.hasher), rtol=0, atol=0)

    def test_shards_within_limit(self):
        for f in os.listdir(self.dir):
            self.assertLessEqual(os.path.getsize(os.path.join(self.dir, f)), export.SHARD_LIMIT)
        small = os.path.join(self.tmp, "sharded")
        os.makedirs(small)
        export.write_shards(small, export.checkpoint_tensors(self.model), limit=1 << 20)
        from flashdesk_ref.checkpoint import Checkpoint
        self.assertTrue(os.path.exists(os.path.join(small, "model.safetensors.index.json")))
        shutil.copy(os.path.join(self.dir, "config.json"), small)
        shutil.copy(os.path.join(self.dir, "engram_map.safetensors"), small)
        self.assertTrue(Checkpoint(small).has("layers.3.attn.wq_a.weight"))


if __name__ == "__main__":
    unittest.main()
