"""The demo task source: per-task generator options reach the training stream and leave the eval
sets (which name their own options) unchanged."""
import os
import unittest

import numpy as np

from helpers import REPO
from train.config import load_model_config
from train.demo_tasks import DemoTasks

MODEL = os.path.join(REPO, "assets", "models", "flash-tiny")


class GeneratorOptionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cfg = load_model_config(os.path.join(MODEL, "config.json"))
        cls.plain = DemoTasks(cfg)
        cls.dense = DemoTasks(cfg, generator_options={"recall": {"extra_questions": 1.0, "max_facts": 6}})

    def test_training_recall_samples_get_more_answers(self):
        runs = lambda s: int(np.sum(np.diff(s.target.astype(np.int8)) == 1))  # answer spans
        plain = [runs(self.plain.sample("recall", seed, 4096)) for seed in range(30)]
        dense = [runs(self.dense.sample("recall", seed, 4096)) for seed in range(30)]
        self.assertGreater(sum(dense), sum(plain), (plain, dense))
        self.assertGreaterEqual(sum(p != d for p, d in zip(plain, dense)), 10)

    def test_eval_samples_and_other_tasks_are_unchanged(self):
        for seed in range(5):
            a = self.plain.sample("recall_500", seed, 4096, task="recall", distance=500, final_only=True)
            b = self.dense.sample("recall_500", seed, 4096, task="recall", distance=500, final_only=True)
            np.testing.assert_array_equal(a.ids, b.ids)
            np.testing.assert_array_equal(self.plain.sample("copy", seed).ids, self.dense.sample("copy", seed).ids)


if __name__ == "__main__":
    unittest.main()
