#!/usr/bin/env python3
"""Measures the torch CPU behaviours the official V4.1 code relies on and the engine copies
(docs/numerics.md): how `topk` breaks exact ties, and how the indexer's BF16 score arithmetic
rounds. Run with the torch the official goldens are made with (the GPU machine's python3):

    python3 tools/torch_numerics_probe.py --out tests/data/torch_topk_ties.json

The JSON it writes is the fixture of tests/engine/torch_topk_test.cpp: score rows with many exact
ties and the indices torch.topk returned for them (sorted=False and sorted=True), in both of its
CPU algorithms (partial sort when 64 k <= n, nth_element otherwise). It also prints how often the
indexer score emulation of docs/numerics.md differs from the official einsum/sum in BF16.
"""
import argparse
import json
import platform

import torch


def tie_rows(gen, n, levels):
    """A row of n scores drawn from `levels` distinct bf16-exact values (many exact ties)."""
    vals = torch.randint(0, levels, (n,), generator=gen).float() * 0.125 - 1.0
    return vals


def topk_cases(gen):
    cases = []
    for n, k, levels in ((16, 4, 3), (24, 16, 5), (40, 16, 4), (64, 16, 6), (100, 16, 8),
                         (300, 16, 10), (1024, 16, 12), (1500, 16, 6), (9, 2, 3), (8, 2, 2),
                         (384, 6, 40), (600, 6, 5), (128, 64, 7), (2048, 512, 30),
                         (257, 4, 2), (5000, 64, 50)):
        for rep in range(3):
            row = tie_rows(gen, n, levels)
            if rep == 2:  # some -inf entries, as masked scores have
                row[torch.randint(0, n, (n // 4,), generator=gen)] = -torch.inf
            for dtype in (torch.float32, torch.bfloat16):
                x = row.to(dtype)
                u = torch.topk(x, k, dim=-1, sorted=False).indices.tolist()
                s = torch.topk(x, k, dim=-1, sorted=True).indices.tolist()
                cases.append({"n": n, "k": k, "dtype": str(dtype).split(".")[-1],
                              "values": [float(v) if v != -float("inf") else "-inf"
                                         for v in x.float().tolist()],
                              "unsorted": u, "sorted": s})
    return cases


def indexer_score_probe(gen, rows=64, heads=32, entries=200, d=128):
    """The official score: einsum in bf16, relu, times bf16 weights, sum over heads in bf16;
    against the emulation: bf16(fp32 dot), relu, bf16(product), bf16(fp32 sum in head order)."""
    def fp4_like(shape):
        grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
        v = grid[torch.randint(0, 8, shape, generator=gen)]
        v = v * torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
        scale = 2.0 ** torch.randint(-8, -3, shape[:-1] + (1,), generator=gen).float()
        return (v * scale).to(torch.bfloat16)

    q = fp4_like((1, rows, heads, d))
    k = fp4_like((1, entries, d))
    w = (torch.randn(1, rows, heads, generator=gen) * 0.3).to(torch.bfloat16)
    w = w * (128 ** -0.5 * heads ** -0.5)
    official = torch.einsum("bshd,btd->bsht", q, k)
    official = (official.relu_() * w.unsqueeze(-1)).sum(dim=2)
    dots = torch.einsum("bshd,btd->bsht", q.float(), k.float()).to(torch.bfloat16)
    prods = (dots.float().relu() * w.float().unsqueeze(-1)).to(torch.bfloat16).float()
    acc = torch.zeros_like(prods[:, :, 0])
    for h in range(heads):
        acc = acc + prods[:, :, h]
    emulated = acc.to(torch.bfloat16)
    dot_diff = int((official.float() != emulated.float()).sum())
    return {"rows": rows, "heads": heads, "entries": entries,
            "weights_dtype": str(w.dtype), "score_dtype": str(official.dtype),
            "scores_differing": dot_diff, "scores_total": official.numel()}


def row_sum_probe(gen):
    """Which order torch's CPU sum(dim=-1) adds short rows in (the MoE gate's normalising sum):
    the share of 20,000 random rows each candidate order reproduces bit for bit."""
    out = {}
    for k in (2, 6, 8):
        w = torch.rand(20000, k, generator=gen) * torch.rand(20000, 1, generator=gen) * 3
        got = w.sum(dim=-1)

        def in_order(order):
            acc = w[:, order[0]].clone()
            for i in order[1:]:
                acc = acc + w[:, i]
            return acc

        cands = {"index order": in_order(list(range(k)))}
        if k == 6:
            cands["((((w0+w4)+w5)+w1)+w2)+w3"] = in_order([0, 4, 5, 1, 2, 3])
        out[k] = {name: float((v == got).float().mean()) for name, v in cands.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(7)
    probe = indexer_score_probe(gen)
    print("indexer score emulation:", probe)
    sums = row_sum_probe(gen)
    print("row sums (share of rows each order reproduces):", sums)
    data = {"torch": torch.__version__, "machine": platform.machine(),
            "indexer_score_probe": probe, "row_sum_probe": sums, "cases": topk_cases(gen)}
    with open(args.out, "w") as f:
        json.dump(data, f)
    print(f"wrote {len(data['cases'])} topk cases to {args.out}")


if __name__ == "__main__":
    main()
