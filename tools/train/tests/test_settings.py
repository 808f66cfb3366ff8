"""Settings files: a "base" file's values under the file's own, unknown keys and cycles refused."""
import json
import os
import tempfile
import unittest

from helpers import REPO
from train.settings import DEFAULTS, load_settings


class SettingsFileTest(unittest.TestCase):
    def write(self, d, name, values):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump(values, f)
        return path

    def test_base_values_are_overridden_by_the_file_and_the_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "base.json", {"lr": 1e-3, "seed": 7, "total_steps": 100})
            os.mkdir(os.path.join(d, "runs"))
            path = self.write(d, "runs/next.json", {"base": "../base.json", "seed": 8})
            s = load_settings(path, {"total_steps": 200})
            self.assertEqual((s["lr"], s["seed"], s["total_steps"]), (1e-3, 8, 200))
            self.assertEqual(s["workers"], DEFAULTS["workers"])
            self.assertNotIn("base", s)

    def test_cycles_and_unknown_keys_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, "a.json", {"base": "b.json"})
            path = self.write(d, "b.json", {"base": "a.json"})
            with self.assertRaisesRegex(ValueError, "include each other"):
                load_settings(path)
            path = self.write(d, "c.json", {"base": "d.json", "learning_rate": 1})
            self.write(d, "d.json", {})
            with self.assertRaisesRegex(ValueError, "unknown training settings"):
                load_settings(path)

    def test_the_next_runs_file_loads(self):
        s = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-next.json"))
        self.assertEqual(s["seed"], 20260501)  # from flash-tiny.json
        self.assertIn("add4_e50", s["eval_tasks"])


if __name__ == "__main__":
    unittest.main()
