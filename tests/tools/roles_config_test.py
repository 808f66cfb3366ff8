"""tools/configs/roles_config.py writes the committed assets/configs/deepseek-v4.1-flash-roles.json
(so the asset stays what the script documents), and its Engram rows are sums of primes."""
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools", "configs"))

import roles_config  # noqa: E402


class RolesConfigTest(unittest.TestCase):
    def test_script_writes_the_committed_asset(self):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "configs", "roles_config.py")],
                             check=True, capture_output=True, text=True).stdout
        with open(os.path.join(ROOT, "assets", "configs", "deepseek-v4.1-flash-roles.json"),
                  encoding="utf-8") as f:
            self.assertEqual(out, f.read())

    def test_engram_rows_are_consecutive_prime_sums(self):
        # 3 primes a layer (1 n-gram size x 3 heads) from 10: 11 13 17 | 19 23 29
        self.assertEqual(roles_config.engram_rows(10, 2, 1, 3), [41, 71])
        self.assertEqual(roles_config.engram_rows(10, 1, 2, 1), [24])

    def test_only_layers_and_engram_tables_change(self):
        with open(roles_config.SOURCE, encoding="utf-8") as f:
            full = json.load(f)
        small = roles_config.roles_config(json.dumps(full))
        changed = {k for k in full["text_config"]
                   if full["text_config"][k] != small["text_config"][k]}
        self.assertEqual(changed, {
            "num_hidden_layers", "compress_ratios", "kv_source_layer_ids",
            "index_source_layer_ids", "candidate_source_layer_id", "engram_layer_ids",
            "engram_vocab_size", "engram_num_embeddings", "dspark_target_layer_ids"})


if __name__ == "__main__":
    unittest.main()
