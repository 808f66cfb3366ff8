"""Rendered rows: packing, loss masks, image spans; the eval-item format; the config size script."""

import json
import os
import tempfile
import unittest

import numpy as np

import demo_support
from demo import chat_format, config_size, image_preprocess, make_dataset, make_eval, mixture, vision_layout


class DatasetTest(unittest.TestCase):
    def test_rows_are_packed_deterministic_and_consistent(self):
        tok = demo_support.tokenizer()
        rows = list(make_dataset.stream_rows(tok, seed=4, max_len=2048, stop=40))
        again = list(make_dataset.stream_rows(tok, seed=4, max_len=2048, stop=40))
        image_id, bos = tok.token_id(chat_format.IMAGE), tok.token_id(chat_format.BOS)
        for row, other in zip(rows, again):
            np.testing.assert_array_equal(row["ids"], other["ids"])
            self.assertEqual(row["ids"].shape, (2048,))
            for ex in row["examples"]:
                self.assertEqual(row["ids"][ex["offset"]], bos)
                self.assertTrue(np.all(row["segments"][ex["offset"]:ex["offset"] + ex["length"]] > 0))
            for (start, length, n_h, n_w), img in zip(row["image_spans"], row["images"]):
                self.assertEqual(length, vision_layout.span_length(n_h, n_w))
                self.assertTrue(np.all(row["ids"][start:start + length] == image_id))
                self.assertTrue(np.all(row["targets"][start:start + length] == 0))
                self.assertEqual((n_h, n_w), vision_layout.grid(*img.shape[:2]))
            self.assertTrue(np.all(row["targets"][row["segments"] == 0] == 0))
        self.assertEqual(sum(len(r["examples"]) for r in rows), 40)

    def test_rows_hold_pictures_as_the_engine_letterboxes_them(self):
        # 308 px would be 8x8 image tokens, over flash-tiny's 64-token budget: the engine scales it to
        # 294 px (7x7), and the rows must hold that picture and span, as the trainer's samples do.
        tok = demo_support.tokenizer()
        rows = list(make_dataset.stream_rows(tok, seed=4, max_len=2048, stop=6, weights={"image": 1.0},
                                             image_size=308))
        drawn = [mixture.generate_sample("train", 4, k, {"image": 1.0}, image_size=308).images[0] for k in range(6)]
        pictures = [img for row in rows for img in row["images"]]
        spans = [s for row in rows for s in row["image_spans"]]
        self.assertEqual(len(pictures), 6)
        for img, (_, length, n_h, n_w), raw in zip(pictures, spans, drawn):
            self.assertEqual(raw.shape, (308, 308, 3))
            np.testing.assert_array_equal(img, image_preprocess.preprocess(raw, make_dataset.VISION))
            self.assertEqual((n_h, n_w, length), (7, 7, 58))

    def test_vision_limits_are_the_shipped_models(self):
        with open(os.path.join(demo_support.REPO, "assets", "models", "flash-tiny", "config.json")) as f:
            vc = json.load(f)["vision_config"]
        self.assertEqual(make_dataset.VISION, {"patch": vc["patch_size"], "downsample": vc["downsample_ratio"],
                                               "min_pixels": vc["min_pixels"],
                                               "max_image_tokens": vc["max_image_tokens"]})

    def test_vision_layout_rules(self):
        self.assertEqual(vision_layout.grid(168, 168), (4, 4))
        self.assertEqual(vision_layout.span_length(4, 4), 22)
        self.assertEqual(vision_layout.resized_size(168, 168, min_pixels=28224), (168, 168))
        self.assertEqual(vision_layout.resized_size(100, 100), (546, 546))  # upscaled to >= 544^2, x14
        h, w = vision_layout.resized_size(4000, 4000)
        n_h, n_w = vision_layout.grid(h, w)
        self.assertLessEqual(n_h * (n_w + 1) + 2, 1024)

    def test_eval_items(self):
        tok = demo_support.tokenizer()
        with tempfile.TemporaryDirectory() as d:
            items = list(make_eval.arithmetic_items(2, 0)) + list(make_eval.image_items(3, 0, d))
            items += list(make_eval.recall_items(tok, 1, 0, 4096))[:2]
            for item in items:
                json.dumps(item)
                self.assertTrue(item["prompt_text"].endswith("<｜Assistant｜><think>"))
                for m in item["messages"]:
                    for part in chat_format.content_parts(m):
                        if part["type"] == "image":
                            self.assertTrue(os.path.exists(os.path.join(d, part["path"])))
            efforts = [i["effort"] for i in items if i["task"] == "arithmetic"][:4]
            self.assertEqual(efforts, [25, 50, 75, 100])

    def test_config_size_of_the_every_role_test_config(self):
        with open(os.path.join(demo_support.REPO, "assets", "configs", "test-every-role.json")) as f:
            cfg = json.load(f)
        t = cfg["text_config"]
        self.assertEqual(config_size.engram_primes(t["engram_vocab_size"], 2, 6), t["engram_num_embeddings"])
        rows = {name: (p, b) for name, p, b, _ in config_size.layer_tensors(t, 2, 4)}
        self.assertEqual(rows["wq_b"], (512 * 128, 512 * 128 + 16 * 4))  # FP8 + one E8M0 per 32x32 tile
        self.assertEqual(rows["routed experts"][0], 8 * 3 * 64 * 256)
        self.assertEqual(rows["routed experts"][1], 8 * (2 * (64 * 128 + 64 * 8) + (256 * 32 + 256 * 2)))


if __name__ == "__main__":
    unittest.main()
