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


class PictureSizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tasks = DemoTasks(load_model_config(os.path.join(MODEL, "config.json")))

    def test_sizes_the_engine_keeps_give_their_image_token_grid(self):
        for size, grid in ((168, 4), (210, 5), (252, 6), (294, 7)):
            s = self.tasks.sample("image", 3, task="image", sizes=[size])
            (img,) = s.images
            self.assertEqual((img.vit_h, img.vit_w, img.llm_h, img.llm_w), (size // 14,) * 2 + (grid,) * 2)
            self.assertEqual(img.pixels.shape, ((size // 14) ** 2, 3 * 14 * 14))

    def test_a_picture_the_engine_would_resize_is_refused(self):
        # 308 px is a multiple of 14, but 8x8 image tokens are over flash-tiny's 64: the engine
        # scales it to 294 first, so training on it as drawn would teach a layout never seen
        with self.assertRaisesRegex(ValueError, "not at its processed size"):
            self.tasks.sample("image", 3, task="image", sizes=[308])


class RewordedEvalSetsTest(unittest.TestCase):
    """The sizes run's arith_varied and recall_varied sets (issue 21): an eval set's options replace
    the training stream's, so each names varied_share 1.0 itself; every question is then asked in
    another wording than the same seed's set at 0, and the final answer (thinking included) is the same."""

    def test_every_question_reworded_with_the_same_answer(self):
        from train.settings import load_settings
        s = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-sizes.json"))
        tasks = DemoTasks(load_model_config(os.path.join(MODEL, "config.json")), **s["task_options"])
        for name in ("arith_varied", "recall_varied"):
            options = s["eval_tasks"][name]
            self.assertEqual(options["varied_share"], 1.0)
            for seed in range(12):
                varied = tasks.sample(name, seed, s["max_len"], **options)
                plain = tasks.sample(name, seed, s["max_len"], **dict(options, varied_share=0.0))
                with self.subTest(set=name, seed=seed):
                    np.testing.assert_array_equal(varied.ids[varied.answer_start:], plain.ids[plain.answer_start:])
                    self.assertNotEqual(self.question(tasks, varied), self.question(tasks, plain))

    @staticmethod
    def question(tasks, sample):
        """The text of the last user turn (up to the final answer)."""
        head = sample.ids[:sample.answer_start]
        last_user = int(np.nonzero(head == tasks.tok.token_id("<｜User｜>"))[0][-1])
        return tasks.tok.decode(head[last_user:].tolist())


if __name__ == "__main__":
    unittest.main()
