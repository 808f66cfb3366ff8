"""Engram n-gram hash ids (docs/model-spec.md §7), numpy only.

Layout per Engram layer (index e, model layer id L):
- primes: for each n-gram size n = 2..max and head h, the first prime > start that no earlier
  (layer, n, head) has used, where start restarts at engram_vocab_size - 1 for each n-gram size
  and moves to the last prime found for the next head; offsets = cumulative sums of the layer's
  primes in (n, head) order (first offset 0), rows = their total (= engram_num_embeddings[e]).
- multipliers: numpy default_rng(10007 * L).integers(0, bound, max_ngram, int64) * 2 + 1 with
  bound = max(1, (int64_max // compressed_vocab_size) // 2).
- ids: compressed ids c[p - k] for shifts k = 0..max-1; a shift reaching before position 0 or
  at/after a dead (image) token uses pad = token_map[engram_pad_token_id] for it and all further
  shifts; h = c0*mu0, then h ^= c_k*mu_k; the (k+1)-gram hash is h after shift k; id =
  h mod prime + offset, n-gram size major, head minor. All int64.
"""
import numpy as np


def _is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    d = 3
    while d * d <= n:
        if n % d == 0:
            return False
        d += 2
    return True


def engram_primes(vocab_size, max_ngram, n_heads, n_layers):
    """int64 [n_layers, max_ngram - 1, n_heads] primes, drawn in (layer, n-gram, head) order."""
    used = set()
    out = np.zeros((n_layers, max_ngram - 1, n_heads), dtype=np.int64)
    for e in range(n_layers):
        for n in range(max_ngram - 1):
            start = vocab_size - 1
            for h in range(n_heads):
                cand = start + 1
                while not _is_prime(cand) or cand in used:
                    cand += 1
                used.add(cand)
                out[e, n, h] = cand
                start = cand
    return out


def engram_offsets(primes):
    """Row offset of each (layer, n-gram, head) table: cumulative sums within a layer."""
    flat = primes.reshape(primes.shape[0], -1)
    offsets = np.concatenate([np.zeros((flat.shape[0], 1), np.int64), np.cumsum(flat, axis=1)[:, :-1]], axis=1)
    return offsets.reshape(primes.shape)


def engram_multipliers(layer_ids, max_ngram, compressed_vocab_size):
    """int64 [len(layer_ids), max_ngram] odd multipliers."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab_size) // 2)
    rows = [np.random.default_rng(10007 * int(l)).integers(0, bound, size=max_ngram, dtype=np.int64) * 2 + 1
            for l in layer_ids]
    return np.stack(rows).astype(np.int64)


class EngramHasher:
    """Hash ids of one model: holds primes, offsets, multipliers, token map and the pad id."""

    def __init__(self, cfg, token_map, multipliers):
        self.max_ngram = cfg.engram_max_ngram_size
        self.n_heads = cfg.engram_n_heads
        self.primes = engram_primes(cfg.engram_vocab_size, self.max_ngram, self.n_heads,
                                    len(cfg.engram_layer_ids))
        self.offsets = engram_offsets(self.primes)
        self.rows = self.primes.reshape(len(cfg.engram_layer_ids), -1).sum(axis=1)
        self.token_map = np.asarray(token_map, dtype=np.int64)
        self.multipliers = np.asarray(multipliers, dtype=np.int64)
        self.pad = int(self.token_map[cfg.engram_pad_token_id])

    def shifted_ids(self, token_ids, dead, positions):
        """[T, max_ngram] compressed ids c[p-k] with the pad rule, for each p in positions."""
        token_ids = np.asarray(token_ids, dtype=np.int64)
        if token_ids.size and token_ids.max() >= len(self.token_map):
            raise ValueError(f"token id {int(token_ids.max())} is beyond the Engram token map "
                             f"({len(self.token_map)} ids: len(tokenizer))")
        c = self.token_map[token_ids]
        dead = np.asarray(dead, dtype=bool)
        out = np.full((len(positions), self.max_ngram), self.pad, dtype=np.int64)
        for row, p in enumerate(positions):
            for k in range(self.max_ngram):
                q = p - k
                if q < 0 or dead[q]:
                    break
                out[row, k] = c[q]
        return out

    def hash_ids(self, token_ids, dead, positions):
        """int64 [T, n_engram_layers, (max_ngram-1) * n_heads] row ids (offsets included)."""
        s = self.shifted_ids(token_ids, dead, positions)               # [T, max_ngram]
        n_layers = self.multipliers.shape[0]
        out = np.zeros((len(positions), n_layers, (self.max_ngram - 1) * self.n_heads), np.int64)
        for e in range(n_layers):
            mu = self.multipliers[e]
            h = s[:, 0] * mu[0]
            for k in range(1, self.max_ngram):
                h = np.bitwise_xor(h, s[:, k] * mu[k])
                for head in range(self.n_heads):
                    col = (k - 1) * self.n_heads + head
                    out[:, e, col] = h % self.primes[e, k - 1, head] + self.offsets[e, k - 1, head]
        return out
