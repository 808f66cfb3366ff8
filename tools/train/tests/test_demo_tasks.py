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

    def test_a_picture_the_engine_would_resize_is_letterboxed_as_the_engine_does(self):
        # 308 px is a multiple of 14, but 8x8 image tokens are over flash-tiny's 64: the engine
        # scales it to 294 first (tools/demo/image_preprocess.py, its port), and so does training
        from demo import image_preprocess, shapes
        s = self.tasks.sample("image", 3, task="image", sizes=[308])
        (img,) = s.images
        self.assertEqual((img.vit_h, img.vit_w, img.llm_h, img.llm_w), (21, 21, 7, 7))
        drawn = shapes.generate(3, sizes=[308]).images[0]
        self.assertEqual(drawn.shape, (308, 308, 3))
        self.assertEqual(img.pixels.tolist(), self.patches(image_preprocess.letterbox(drawn, 294, 294)).tolist())

    def test_a_picture_of_any_size_and_aspect_trains(self):
        from demo import vision_layout
        shapes_seen = set()
        for seed in range(12):
            s = self.tasks.sample("image", seed, task="image", style_share=1.0)
            (img,) = s.images
            self.assertEqual((img.llm_h, img.llm_w), vision_layout.grid(img.vit_h * 14, img.vit_w * 14))
            self.assertLessEqual(vision_layout.span_length(img.llm_h, img.llm_w), 64)
            self.assertEqual(img.pixels.shape, (img.vit_h * img.vit_w, 3 * 14 * 14))
            # the span the ids hold is the letterboxed picture's (every position the image token)
            self.assertEqual(int(np.sum(s.ids == self.tasks.tok.token_id("<｜deepseek_image｜>"))),
                             vision_layout.span_length(img.llm_h, img.llm_w))
            shapes_seen.add((img.vit_h, img.vit_w))
        self.assertTrue(any(h != w for h, w in shapes_seen), shapes_seen)

    @staticmethod
    def patches(img):
        x = (img.astype(np.float32) / 255.0 - 0.5) / 0.5
        vh, vw = img.shape[0] // 14, img.shape[1] // 14
        return x.transpose(2, 0, 1).reshape(3, vh, 14, vw, 14).transpose(1, 3, 0, 2, 4).reshape(vh * vw, -1)


class StyledEvalSetTest(unittest.TestCase):
    """The sizes run's image_styles set (issue 21): every picture styled (style_share 1.0, named by the
    set itself), letterboxed as the engine does; the question and final answer are those of the
    same seed's set at 0."""

    def test_every_picture_styled_with_the_same_answer(self):
        from train.settings import load_settings
        s = load_settings(os.path.join(REPO, "tools/train/configs/flash-tiny-sizes.json"))
        tasks = DemoTasks(load_model_config(os.path.join(MODEL, "config.json")), **s["task_options"])
        self.assertEqual(s["task_options"]["generator_options"]["image"]["style_share"], 0.3)
        self.assertEqual(list(s["eval_tasks"])[-1], "image_styles")  # after the others: their seeds stay
        options = s["eval_tasks"]["image_styles"]
        self.assertEqual(options["style_share"], 1.0)
        grids = set()
        for seed in range(8):
            styled = tasks.sample("image_styles", seed, s["max_len"], **options)
            plain = tasks.sample("image_styles", seed, s["max_len"], **dict(options, style_share=0.0))
            with self.subTest(seed=seed):
                np.testing.assert_array_equal(styled.ids[styled.answer_start:], plain.ids[plain.answer_start:])
                self.assertEqual(self.after_image(tasks, styled), self.after_image(tasks, plain))
                a, b = styled.images[0], plain.images[0]
                self.assertFalse(a.pixels.shape == b.pixels.shape and np.array_equal(a.pixels, b.pixels))
                grids.add((a.llm_h, a.llm_w))
        self.assertGreater(len(grids), 1)

    @staticmethod
    def after_image(tasks, sample):
        """The prompt after the picture's span (the question), up to the final answer."""
        head = sample.ids[:sample.answer_start]
        last = int(np.nonzero(head == tasks.tok.token_id("<｜deepseek_image｜>"))[0][-1])
        return tasks.tok.decode(head[last + 1:].tolist())


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
