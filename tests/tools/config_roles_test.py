"""Layer roles derived from V4.1 configs by tools/flashdesk_ref/config.py (numpy only)."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from flashdesk_ref.config import Config  # noqa: E402
from flashdesk_ref.safetensors import FormatError  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

# the released V4.1-Flash text_config fields that decide roles (docs/model-spec.md §1.2)
FULL_SIZE = {"text_config": {
    "num_hidden_layers": 40, "compress_ratios": [0, 0] + [2] * 18 + [1] * 20 + [0, 0, 0],
    "kv_source_layer_ids": [2, 8, 14, 20], "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
    "candidate_source_layer_id": 20, "engram_layer_ids": [1, 14],
    "engram_num_embeddings": [384006168, 384016682]}}


class RolesTest(unittest.TestCase):
    def test_full_size_table(self):
        roles = Config(FULL_SIZE).roles
        by = {r.layer: r for r in roles}
        for l in (0, 1):
            self.assertEqual(by[l].role, "window")
        for l in (2, 8, 14):
            self.assertEqual((by[l].role, by[l].kv_source, by[l].index_source), ("full", l, l))
        for l, src in ((3, 2), (7, 2), (9, 8), (13, 8), (15, 14), (19, 14)):
            self.assertEqual((by[l].role, by[l].kv_source, by[l].index_source), ("reuse", src, src))
        self.assertEqual(by[20].role, "full")
        self.assertTrue(by[20].builds_candidates)
        self.assertEqual(by[20].candidate_source, -1)   # its own top-k is not restricted
        for l in (24, 28, 32, 36):
            self.assertEqual((by[l].role, by[l].kv_source, by[l].candidate_source), ("reindex", 20, 20))
        for l, idx in ((21, 20), (23, 20), (25, 24), (37, 36), (39, 36)):
            self.assertEqual((by[l].role, by[l].kv_source, by[l].index_source), ("reuse", 20, idx))
        self.assertEqual([r.layer for r in roles if r.engram], [1, 14])
        self.assertEqual(Config(FULL_SIZE).decoder_first_layer, 20)
        self.assertEqual([r.layer for r in roles if r.decoder], list(range(20, 40)))

    def test_every_role_test_config(self):
        with open(os.path.join(ROOT, "assets", "configs", "test-every-role.json")) as f:
            cfg = Config(json.load(f))
        got = [(r.role, r.kv_source, r.index_source, r.candidate_source) for r in cfg.roles]
        self.assertEqual(got, [
            ("window", -1, -1, -1), ("window", -1, -1, -1),
            ("full", 2, 2, -1), ("reuse", 2, 2, -1), ("reuse", 2, 2, -1),
            ("full", 5, 5, -1), ("reuse", 5, 5, -1), ("reuse", 5, 5, -1),
            ("full", 8, 8, -1), ("reuse", 8, 8, -1), ("reindex", 8, 10, 8), ("reuse", 8, 10, -1),
            ("reindex", 8, 12, 8), ("reuse", 8, 12, -1)])
        self.assertEqual(cfg.decoder_first_layer, 8)

    def test_engram_in_the_decoder_means_no_decoder(self):
        raw = json.loads(json.dumps(FULL_SIZE))
        raw["text_config"]["engram_layer_ids"] = [1, 30]
        self.assertEqual(Config(raw).decoder_first_layer, 40)

    def test_layer_without_kv_source_is_an_error(self):
        raw = {"text_config": {"num_hidden_layers": 3, "compress_ratios": [0, 2, 2],
                               "kv_source_layer_ids": [2], "index_source_layer_ids": [2]}}
        with self.assertRaisesRegex(FormatError, "layer 1 .* no KV source"):
            Config(raw)

    def test_out_of_range_layer_id_is_an_error(self):
        raw = {"text_config": {"num_hidden_layers": 2, "compress_ratios": [0, 0], "engram_layer_ids": [5]}}
        with self.assertRaisesRegex(FormatError, "engram_layer_ids"):
            Config(raw)

    def test_reuse_of_an_index_source_with_other_kv_is_an_error(self):
        raw = {"text_config": {"num_hidden_layers": 3, "compress_ratios": [2, 1, 1],
                               "kv_source_layer_ids": [0, 1], "index_source_layer_ids": [0]}}
        with self.assertRaisesRegex(FormatError, "index source"):
            Config(raw)


if __name__ == "__main__":
    unittest.main()
