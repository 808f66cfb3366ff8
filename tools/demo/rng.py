"""A seeded random source whose draws are identical on every machine and Python version.

Python only guarantees that random.Random(int).random() keeps its sequence across versions
(randrange/choice/shuffle may change), so every draw here is derived from random() alone.
Per-sample seeds come from SHA-256 of a readable key, so train and eval seeds never collide.
"""

import hashlib
import math
import random


def derive_seed(*parts):
    """A 64-bit seed from readable parts, e.g. derive_seed("train", "recall", 7, 123)."""
    key = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")


class Rng:
    def __init__(self, seed):
        self._r = random.Random(int(seed))

    def random(self):
        return self._r.random()

    def below(self, n):
        """Uniform integer in [0, n)."""
        if n <= 0:
            raise ValueError(f"below() needs n > 0, got {n}")
        return min(int(self._r.random() * n), n - 1)

    def randint(self, lo, hi):
        """Uniform integer in [lo, hi] (both ends included)."""
        return lo + self.below(hi - lo + 1)

    def chance(self, p):
        return self._r.random() < p

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def weighted(self, items_and_weights):
        """One item from [(item, weight), ...]."""
        total = sum(w for _, w in items_and_weights)
        x = self._r.random() * total
        for item, w in items_and_weights:
            x -= w
            if x < 0:
                return item
        return items_and_weights[-1][0]

    def shuffle(self, seq):
        """In-place Fisher-Yates shuffle; returns seq."""
        for i in range(len(seq) - 1, 0, -1):
            j = self.below(i + 1)
            seq[i], seq[j] = seq[j], seq[i]
        return seq

    def sample(self, seq, k):
        """k distinct items, in random order."""
        return self.shuffle(list(seq))[:k]

    def log_uniform_int(self, lo, hi):
        """Integer in [lo, hi] whose logarithm is uniform (short and long distances alike)."""
        return min(hi, int(math.exp(math.log(lo) + self._r.random() * (math.log(hi + 1) - math.log(lo)))))
