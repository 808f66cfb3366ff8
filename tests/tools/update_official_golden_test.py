"""tools/update_official_golden.py: a new official golden of flash-tiny goes into the goldens
folder only when it was made by the same official files and revision, on a torch with float8,
with the committed prompt and decode lengths, and of the very weights in the model folder; a
refused one leaves the folder as it was. Runs on copies in a temporary folder (the committed
manifest's values), never on tests/data itself."""
import hashlib
import json
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import update_official_golden as uog  # noqa: E402

COMMITTED = os.path.join(ROOT, "tests", "data", "goldens", "official", "manifest.json")


def digest(data):
    return hashlib.sha256(data).hexdigest()


class UpdateOfficialGolden(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.goldens = os.path.join(self.tmp, "goldens")
        os.makedirs(self.goldens)
        shutil.copyfile(COMMITTED, os.path.join(self.goldens, "manifest.json"))
        with open(COMMITTED) as f:
            self.committed = json.load(f)
        self.old_blocks = b"old golden"
        with open(os.path.join(self.goldens, "flash-tiny.safetensors"), "wb") as f:
            f.write(self.old_blocks)
        # a model folder whose two shards are new weights, and a head shard the golden ignores
        self.model = os.path.join(self.tmp, "model")
        os.makedirs(self.model)
        self.shards = {"model-00001-of-00002.safetensors": b"new weights 1",
                       "model-00002-of-00002.safetensors": b"new weights 2"}
        for name, data in {**self.shards, "model-dspark.safetensors": b"head"}.items():
            with open(os.path.join(self.model, name), "wb") as f:
                f.write(data)
        self.run_dir = os.path.join(self.tmp, "run")
        os.makedirs(self.run_dir)
        case = self.committed["cases"]["flash-tiny"]
        self.run = {"revision": self.committed["official_revision"],
                    "official_files_sha256": dict(self.committed["official_files_sha256"]),
                    "torch": "2.11.0+cu130", "threads": 16,
                    "checkpoint_sha256": {n: digest(d) for n, d in self.shards.items()},
                    "prompt_len": case["prompt_len"], "decode_steps": case["decode_steps"]}
        self.defect = [{"layer": 0, "defective_decode_rel_err": 0.0, "long_prefill_rel_err": 1e-5,
                        "defective_topk_rows_equal": "-", "long_prefill_topk_rows_equal": "-"}]
        with open(os.path.join(self.run_dir, "flash-tiny-blocks.safetensors"), "wb") as f:
            f.write(b"new golden")

    def write_run(self):
        with open(os.path.join(self.run_dir, "flash-tiny-manifest.json"), "w") as f:
            json.dump(self.run, f)
        with open(os.path.join(self.run_dir, "flash-tiny-decode-defect.json"), "w") as f:
            json.dump(self.defect, f)

    def folder(self):
        with open(os.path.join(self.goldens, "manifest.json")) as f:
            manifest = f.read()
        with open(os.path.join(self.goldens, "flash-tiny.safetensors"), "rb") as f:
            return manifest, f.read()

    def test_a_golden_of_these_weights_replaces_the_old_one(self):
        self.write_run()
        uog.update(self.run_dir, self.model, self.goldens)
        manifest, blocks = self.folder()
        self.assertEqual(blocks, b"new golden")
        m = json.loads(manifest)
        self.assertEqual(m["cases"]["flash-tiny"]["sha256"],
                         {n: digest(d) for n, d in self.shards.items()})
        self.assertEqual(m["decode_defect"]["flash-tiny"], self.defect)
        # the old golden's order noise does not carry over (official_order_noise.py measures anew)
        self.assertIn("order_noise", self.committed["cases"]["flash-tiny"])
        self.assertNotIn("order_noise", m["cases"]["flash-tiny"])
        self.assertIn("torch 2.11.0+cu130, 16 threads", m["made_by"])
        # the other case and the official hashes are untouched
        self.assertEqual(m["cases"]["test-official"], self.committed["cases"]["test-official"])
        self.assertEqual(m["decode_defect"]["test-official"],
                         self.committed["decode_defect"]["test-official"])
        self.assertEqual(m["official_files_sha256"], self.committed["official_files_sha256"])

    def assert_refused(self, reason):
        self.write_run()
        before = self.folder()
        with self.assertRaisesRegex(uog.Refused, reason):
            uog.update(self.run_dir, self.model, self.goldens)
        self.assertEqual(self.folder(), before)
        self.assertEqual(sorted(os.listdir(self.goldens)), ["flash-tiny.safetensors", "manifest.json"])

    def test_other_weights_are_refused(self):
        self.run["checkpoint_sha256"]["model-00002-of-00002.safetensors"] = digest(b"old weights")
        self.assert_refused("model-00002-of-00002.safetensors: the run's sha256")

    def test_an_emulated_run_is_refused(self):
        self.run["torch"] = "1.13.0a0"
        self.assert_refused("no float8 dtypes")

    def test_other_official_files_are_refused(self):
        self.run["official_files_sha256"]["model.py"] = "0" * 64
        self.assert_refused("official model.py")

    def test_another_revision_is_refused(self):
        self.run["revision"] = "0123456789abcdef"
        self.assert_refused("official revision")

    def test_another_prompt_is_refused(self):
        self.run["prompt_len"] = 174
        self.assert_refused("prompt_len 174")

    def test_a_missing_or_broken_file_is_refused(self):
        self.write_run()
        with open(os.path.join(self.run_dir, "flash-tiny-decode-defect.json"), "w") as f:
            f.write("[{")
        before = self.folder()
        with self.assertRaisesRegex(uog.Refused, "decode-defect.json"):
            uog.update(self.run_dir, self.model, self.goldens)
        os.remove(os.path.join(self.run_dir, "flash-tiny-blocks.safetensors"))
        with self.assertRaisesRegex(uog.Refused, "missing"):
            uog.update(self.run_dir, self.model, self.goldens)
        self.assertEqual(self.folder(), before)

    def test_the_command_line_reports_a_refusal_with_exit_1(self):
        self.run["torch"] = "1.13.0"
        self.write_run()
        self.assertEqual(uog.main([self.run_dir, "--model", self.model, "--goldens", self.goldens]), 1)


if __name__ == "__main__":
    unittest.main()
