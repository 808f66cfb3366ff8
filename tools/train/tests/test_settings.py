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

    def test_the_looks_file_is_the_wordings_file_with_other_pictures_and_sum_stories(self):
        """The next run's settings change the shapes' radii and shades, the scenes' object counts, the
        picture questions', sums' and facts' sentences only (docs/demo-eval.md, "Development cells for
        shapes of other radii, shades and crowds", "... for sums in free wordings" and "... for
        recall in free wordings")."""
        looks = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-looks.json"))
        wordings = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-wordings.json"))
        image = looks["task_options"]["generator_options"]["image"]
        self.assertEqual((image.pop("radius_share"), image.pop("shade_share"), image.pop("crowd_share"),
                          image.pop("asking_share")), (0.5, 0.5, 0.3, 0.3))
        added = looks["eval_tasks"].pop("image_looks")
        self.assertEqual((added["radius_share"], added["shade_share"], added["style_share"]), (1.0, 1.0, 1.0))
        added = looks["eval_tasks"].pop("image_crowds")
        self.assertEqual((added["crowd_share"], added["style_share"]), (1.0, 1.0))
        options = looks["task_options"]["generator_options"]
        self.assertEqual((options["arithmetic"].pop("story_share"),
                          options["followup"]["arithmetic_options"].pop("story_share")), (0.3, 0.3))
        self.assertEqual(looks["eval_tasks"].pop("arith_stories")["story_share"], 1.0)
        self.assertEqual((options["recall"].pop("told_share"), options["recall"].pop("asked_share")), (0.4, 0.3))
        added = looks["eval_tasks"].pop("recall_tellings")
        self.assertEqual((added["told_share"], added["asked_share"]), (1.0, 1.0))
        self.assertEqual(looks, wordings)

    def test_every_configs_file_draws_a_sample_of_each_task_and_eval_set(self):
        """A misspelt generator option fails here (TypeError), not minutes into a GPU call."""
        from train.config import load_model_config
        from train.demo_tasks import DemoTasks
        configs = os.path.join(REPO, "tools/train/configs")
        for name in sorted(n for n in os.listdir(configs) if not n.endswith("-model.json")):
            s = load_settings(os.path.join(configs, name))
            if s["task_source"] != "demo":
                continue
            with self.subTest(settings=name):
                cfg = load_model_config(os.path.join(REPO, s["model_config"]))
                tasks = DemoTasks(cfg, **s["task_options"])
                for task in s["tasks"]:
                    self.assertGreater(len(tasks.sample(task, 1).ids), 0)
                for set_name, options in (s["eval_tasks"] or {}).items():
                    self.assertGreater(len(tasks.sample(set_name, 1, **options).ids), 0)
                # every picture size a file names draws (one the engine resizes is letterboxed as it does)
                named = ([s["task_options"].get("generator_options", {}).get("image", {})]
                         + [e for e in (s["eval_tasks"] or {}).values() if e.get("task") == "image"])
                for size in sorted({z for o in named for z in o.get("sizes") or []}):
                    self.assertGreater(len(tasks.sample("image", 1, task="image", sizes=[size]).ids), 0)

    def test_token_shares_add_up_and_follow_sample_length(self):
        from train.token_shares import token_shares
        s = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-pictures.json"))
        shares = token_shares(s, samples=4)
        self.assertEqual(set(shares), set(s["tasks"]))
        self.assertAlmostEqual(sum(share for _, share in shares.values()), 1.0, places=9)
        # a recall chat is many times longer than a picture question
        self.assertGreater(shares["recall"][0], 3 * shares["image"][0])


if __name__ == "__main__":
    unittest.main()
