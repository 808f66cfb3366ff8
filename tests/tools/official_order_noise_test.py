"""tools/official_order_noise.py on a random every-role checkpoint: a golden made by the oracle
itself gets a per-block order noise for its prefill and decode rows, written into its manifest
case (the other cases untouched), finite, non-negative, non-zero somewhere (the two summation
orders differ) and small (the same equations)."""
import json
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import official_order_noise  # noqa: E402
import ref_logits  # noqa: E402
from flashdesk_ref.random_checkpoint import write_random_checkpoint  # noqa: E402
from flashdesk_ref.safetensors import SafeTensorsFile  # noqa: E402

CONFIG = os.path.join(ROOT, "assets", "configs", "test-every-role.json")


class OfficialOrderNoise(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.model = os.path.join(self.tmp, "every-role")
        write_random_checkpoint(CONFIG, self.model, seed=7)
        ids = os.path.join(self.tmp, "ids.json")
        with open(ids, "w") as f:
            json.dump([int(v) for v in np.random.default_rng(3).integers(3, 512, size=40)], f)
        self.goldens = os.path.join(self.tmp, "goldens")
        os.makedirs(self.goldens)
        ref_logits.main(["--model", self.model, "--ids", ids, "--decode", "3", "--prefill", "exact",
                         "--dump", "--out", os.path.join(self.goldens, "g.safetensors")])
        self.other = {"file": "other.safetensors"}
        with open(os.path.join(self.goldens, "manifest.json"), "w") as f:
            json.dump({"cases": {"g": {"file": "g.safetensors"}, "other": self.other}}, f)

    def test_noise_is_written_per_block(self):
        official_order_noise.main(["--case", "g", "--model", self.model, "--goldens", self.goldens])
        with open(os.path.join(self.goldens, "manifest.json")) as f:
            cases = json.load(f)["cases"]
        self.assertEqual(cases["other"], self.other)
        noise = cases["g"]["order_noise"]
        layers = SafeTensorsFile(os.path.join(self.goldens, "g.safetensors")).shape("prefill_block_out")[0]
        self.assertEqual(layers, 14)  # assets/configs/test-every-role.json
        for part in ("prefill", "decode"):
            values = noise[part]
            self.assertEqual(len(values), layers, part)
            self.assertTrue(all(np.isfinite(v) and 0 <= v < 0.1 for v in values), (part, values))
        self.assertGreater(max(noise["prefill"] + noise["decode"]), 0)


if __name__ == "__main__":
    unittest.main()
