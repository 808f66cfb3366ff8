"""Profiler regions: the model's forward marks its parts, and bench.py's region table reads them."""
import unittest

import torch
from torch.profiler import ProfilerActivity, profile

from helpers import micro_config, random_samples, stand_in_hasher
from train.batch import collate
from train.bench import format_regions, region_rows
from train.model import Transformer
from train.numerics import Numerics
from train.objective import Phase, batch_losses
from train.regions import region


class RegionsTest(unittest.TestCase):
    def test_nested_regions_are_rows_with_their_call_counts(self):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                with region("outer"):
                    x = torch.ones(64, 64) @ torch.ones(64, 64)
                    with region("outer.inner"):
                        x = x + 1
        rows = {name: (calls, host) for name, calls, host, _ in region_rows(prof.key_averages())}
        self.assertEqual(set(rows), {"outer", "outer.inner"})
        self.assertEqual(rows["outer"][0], 3)
        self.assertEqual(rows["outer.inner"][0], 3)
        self.assertGreaterEqual(rows["outer"][1], rows["outer.inner"][1])  # inclusive of the nested one
        table = format_regions(region_rows(prof.key_averages()), 0.0, 1.0)
        self.assertIn("outer.inner", table)

    def test_a_training_forward_marks_every_part(self):
        torch.manual_seed(0)
        cfg = micro_config()
        model = Transformer(cfg)
        num = Numerics(emulate_fp32=True)
        batch = collate(random_samples(2, 40, 60, 500, seed=4), cfg.sliding_window, cfg.sliding_window,
                        [False, False])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out = batch_losses(model, num, batch, Phase(distill=True), stand_in_hasher(cfg))
            out["ce_sum"].backward()
        names = {name for name, *_ in region_rows(prof.key_averages())}
        expected = {"mhc", "attention", "attention.core", "attention.compress", "attention.indexer", "moe",
                    "loss.ce", "loss.indexer_kl"}
        if cfg.engram_layer_ids:
            expected.add("engram")
        self.assertLessEqual(expected, names)


if __name__ == "__main__":
    unittest.main()
