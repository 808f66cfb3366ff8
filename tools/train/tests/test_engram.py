"""Vectorised Engram hash ids against the oracle's per-token numpy hasher
(tools/flashdesk_ref/engram_hash.py), with image (dead) spans and the row layout checks."""
import unittest

import numpy as np
import torch

from helpers import every_role_config, stand_in_hasher
from flashdesk_ref.engram_hash import EngramHasher as OracleHasher


class HashIds(unittest.TestCase):
    def test_equal_to_oracle_with_dead_tokens(self):
        cfg = every_role_config()
        mine = stand_in_hasher(cfg)
        oracle = OracleHasher(cfg, mine.token_map.numpy(), mine.multipliers.numpy())
        rng = np.random.default_rng(5)
        B, N = 3, 40
        ids = rng.integers(0, cfg.vocab_size, (B, N))
        dead = np.zeros((B, N), bool)
        dead[1, 10:18] = True
        dead[2, 0:3] = True
        got = mine.hash_ids(torch.from_numpy(ids), torch.from_numpy(dead)).numpy()
        for b in range(B):
            want = oracle.hash_ids(list(ids[b]), list(dead[b]), list(range(N)))
            np.testing.assert_array_equal(got[b], want)

    def test_rows_within_tables(self):
        cfg = every_role_config()
        h = stand_in_hasher(cfg)
        ids = torch.randint(0, cfg.vocab_size, (2, 64))
        got = h.hash_ids(ids, torch.zeros_like(ids, dtype=torch.bool))
        for e, rows in enumerate(cfg.engram_num_embeddings):
            self.assertGreaterEqual(int(got[:, :, e].min()), 0)
            self.assertLess(int(got[:, :, e].max()), rows)


if __name__ == "__main__":
    unittest.main()
