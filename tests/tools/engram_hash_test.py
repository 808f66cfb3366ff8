"""Engram hash ids, primes and multipliers against hand-derived values (numpy only)."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from flashdesk_ref.engram_hash import (EngramHasher, engram_multipliers, engram_offsets,  # noqa: E402
                                       engram_primes)


class Cfg:
    """A tiny Engram layout: vocab 10 -> primes 11, 13 (2-grams) and 17, 19 (3-grams)."""
    engram_max_ngram_size = 3
    engram_n_heads = 2
    engram_vocab_size = 10
    engram_layer_ids = [1]
    engram_pad_token_id = 2


class EngramHashTest(unittest.TestCase):
    def hasher(self):
        # identity token map; multipliers 3, 5, 7 so the hashes can be followed by hand
        return EngramHasher(Cfg, np.arange(10), np.array([[3, 5, 7]]))

    def test_primes_and_offsets_of_a_tiny_layout(self):
        h = self.hasher()
        self.assertEqual(h.primes.tolist(), [[[11, 13], [17, 19]]])
        self.assertEqual(h.offsets.tolist(), [[[0, 11], [24, 41]]])
        self.assertEqual(h.rows.tolist(), [60])

    def test_primes_are_never_reused_and_restart_per_ngram(self):
        # every-role config: vocab 1000, 2 heads, 4-grams, 2 layers (rows 6126 and 6332)
        p = engram_primes(1000, 4, 2, 2)
        self.assertEqual(p.tolist(), [[[1009, 1013], [1019, 1021], [1031, 1033]],
                                      [[1039, 1049], [1051, 1061], [1063, 1069]]])
        self.assertEqual(engram_offsets(p)[1].reshape(-1).tolist(), [0, 1039, 2088, 3139, 4200, 5263])

    def test_full_size_rows_match_the_released_config(self):
        # engram_num_embeddings of V4.1-Flash (docs/model-spec.md §1.2)
        p = engram_primes(16000000, 4, 8, 2)
        self.assertEqual(p.reshape(2, -1).sum(axis=1).tolist(), [384006168, 384016682])

    def test_hash_ids_by_hand(self):
        # tokens 4, 7, 1; pad = map[2] = 2.
        # p0: c = 4, 2, 2: 12 ^ 10 = 6 -> 6 % 11 = 6, 6 % 13 = 6 + 11; 6 ^ 14 = 8 -> 8 + 24, 8 + 41
        # p1: c = 7, 4, 2: 21 ^ 20 = 1 -> 1, 1 + 11; 1 ^ 14 = 15 -> 15 + 24, 15 + 41
        # p2: c = 1, 7, 4: 3 ^ 35 = 32 -> 32 % 11 = 10, 32 % 13 = 6 + 11; 32 ^ 28 = 60 -> 60 % 17 = 9 + 24, 60 % 19 = 3 + 41
        ids = self.hasher().hash_ids([4, 7, 1], [False] * 3, [0, 1, 2])
        self.assertEqual(ids[:, 0].tolist(), [[6, 17, 32, 49], [1, 12, 39, 56], [10, 17, 33, 44]])

    def test_dead_tokens_pad_that_and_every_further_shift(self):
        # token 1 is in an image span: p2 sees c = 1, pad, pad: 3 ^ 10 = 9 -> 9, 20; 9 ^ 14 = 7 -> 31, 48
        # p1 itself is dead: all pad: 6 ^ 10 = 12 -> 1, 12 + 11; 12 ^ 14 = 2 -> 26, 43
        ids = self.hasher().hash_ids([4, 7, 1], [False, True, False], [1, 2])
        self.assertEqual(ids[:, 0].tolist(), [[1, 23, 26, 43], [9, 20, 31, 48]])

    def test_positions_of_a_later_step_look_back_into_earlier_tokens(self):
        h = self.hasher()
        whole = h.hash_ids([4, 7, 1], [False] * 3, [0, 1, 2])
        self.assertEqual(h.hash_ids([4, 7, 1], [False] * 3, [2]).tolist(), whole[2:].tolist())

    def test_token_beyond_the_map_is_an_error(self):
        with self.assertRaises(ValueError):
            self.hasher().hash_ids([4, 12], [False, False], [1])

    def test_multipliers(self):
        m = engram_multipliers([1, 14], 4, 99092)
        bound = (np.iinfo(np.int64).max // 99092) // 2
        self.assertEqual(m.shape, (2, 4))
        self.assertTrue(np.all(m % 2 == 1))
        self.assertTrue(np.all((m >= 1) & (m < 2 * bound + 1)))
        self.assertFalse(np.array_equal(m[0], m[1]))   # seeded by the layer id
        self.assertEqual(engram_multipliers([14], 4, 99092).tolist(), m[1:].tolist())
        # the largest product c * mu stays inside int64
        self.assertLess(int(m.max()) * 99091, np.iinfo(np.int64).max)


if __name__ == "__main__":
    unittest.main()
