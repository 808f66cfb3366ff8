#!/usr/bin/env python3
"""Prints what numpy draws for the cases of tests/engine/numpy_random_test.cpp, as JSON: the
expected values of engine/util/numpy_random (the port of default_rng -> PCG64 ->
Generator.integers that computes Engram's hash multipliers).

    /usr/bin/python3 tools/numpy_random_fixture.py > tests/data/numpy_random/expected.json

Every integer is written as a decimal string, so 64-bit values survive any JSON reader.
"""
import json
import sys

import numpy as np

SEEDS = [0, 1, 2, 7, 10007, 10007 * 14, 123456789, 2**32 - 1, 2**32, 2**32 + 1, 2**63 + 5,
         2**64 - 1]
INT64_MAX = np.iinfo(np.int64).max
# (low, high): every path of random_bounded_uint64_fill (range 0, 32-bit Lemire, the full 32-bit
# draw, 64-bit Lemire) and the multiplier bounds of real compressed vocabulary sizes.
BOUNDS = [(0, 1), (0, 2), (0, 3), (0, 7), (0, 1000), (-5, 5), (0, 2**31 - 1), (0, 2**31),
          (0, 2**32 - 1), (0, 2**32), (0, 2**32 + 1), (7, 2**32 + 9), (0, 2**40 + 3),
          (0, 2**62), (0, INT64_MAX), (-2**63, INT64_MAX), (-2**63, -2**63 + 3)]
BOUNDS += [(0, max(1, (INT64_MAX // v) // 2)) for v in (1, 400, 6864, 98627, 99092, 2**31)]
SIZE = 7  # odd, so a 32-bit draw leaves half of a 64-bit output in the buffer


def s(values):
    return [str(int(v)) for v in values]


def main():
    out = {"numpy_version": np.__version__, "size": SIZE, "seed_state": [], "raw": [],
           "integers": [], "sequential": [], "multipliers": []}
    for seed in SEEDS:
        state = np.random.SeedSequence(seed).generate_state(4, np.uint64)
        out["seed_state"].append({"seed": str(seed), "state": s(state)})
        raw = np.random.PCG64(seed).random_raw(5)
        out["raw"].append({"seed": str(seed), "values": s(raw)})
        for low, high in BOUNDS:
            values = np.random.default_rng(seed).integers(low, high, size=SIZE, dtype=np.int64)
            out["integers"].append({"seed": str(seed), "low": str(low), "high": str(high),
                                    "values": s(values)})
    # Two calls on one generator: the half-used 32-bit buffer carries over, then a 64-bit range.
    for seed in SEEDS[:4]:
        g = np.random.default_rng(seed)
        first = g.integers(0, 10, size=3, dtype=np.int64)
        second = g.integers(0, 10, size=3, dtype=np.int64)
        third = g.integers(0, 2**40, size=2, dtype=np.int64)
        out["sequential"].append({"seed": str(seed), "values": s([*first, *second, *third])})
    # What the official engram.py computes: default_rng(10007 * L).integers(0, bound, max_ngram) * 2 + 1.
    for layers, ngram, vocab in (([1, 14], 4, 99092), ([1, 4], 4, 6864), ([1, 5], 4, 400),
                                 ([0, 3], 3, 98627)):
        bound = max(1, (INT64_MAX // vocab) // 2)
        rows = [np.random.default_rng(10007 * L).integers(0, bound, size=ngram, dtype=np.int64) * 2 + 1
                for L in layers]
        out["multipliers"].append({"layer_ids": layers, "max_ngram_size": ngram,
                                   "compressed_vocab_size": vocab, "values": [s(r) for r in rows]})
    # one case per line: readable in a diff, small on disk
    lines = []
    for key, value in out.items():
        if isinstance(value, list):
            items = ",\n".join("  " + json.dumps(v) for v in value)
            lines.append(f" {json.dumps(key)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    sys.stdout.write("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    main()
