#!/usr/bin/env python3
"""Loads an exported model directory with the oracle (tools/flashdesk_ref) and compares it with
the trainer's eval-mode forward (FP32 emulation, QAT on, torch.topk on the CPU) on a few token
sequences:
- block by block with the same inputs (each oracle block gets the trainer's input stream and
  pre-mix): relative error RMS(diff) / RMS(block_out - block_in), worst over blocks;
- end to end: logits of exact prefill at every position and of bounded prefill at the last one,
  max |diff| / max |oracle logit| and argmax agreement (one-ulp differences inside the FP8/FP4
  and top-k loop spread, so this is informational).

  /usr/bin/python3 tools/train/check_oracle.py --model assets/models/flash-tiny [--ids ids.json]

Exits 1 when the worst per-block error exceeds --tol.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from flashdesk_ref.checkpoint import Checkpoint  # noqa: E402
from flashdesk_ref.model import Model  # noqa: E402

from train.batch import Sample, collate  # noqa: E402
from train.config import load_model_config  # noqa: E402
from train.engram_map import load_hasher  # noqa: E402
from train.export import import_model  # noqa: E402
from train.model import Transformer  # noqa: E402
from train.numerics import Numerics  # noqa: E402
from train.objective import Phase, make_context  # noqa: E402


def trainer_logits(model, num, hasher, ids, bounded, record=None):
    s = Sample("check", np.asarray(ids, np.int64), np.ones(len(ids), bool), len(ids))
    W = model.cfg.sliding_window
    b = collate([s], W, W, [bounded])
    if bounded:
        b.bounded_start[0] = len(ids) - min(len(ids), W)
    with torch.no_grad():
        ctx = make_context(model, b, Phase(distill=False, cpu_topk=True), hasher, record)
        return model.logits(num, model(num, b, ctx))[0, :len(ids)]


class _Trace:
    def __init__(self):
        self.d = {}

    def put(self, name, layer, t, row0=0):
        self.d[(name, layer)] = t.detach().clone()


def per_block_errors(oracle, model, num, hasher, ids):
    """[(layer, role, relative error)] with every oracle block fed the trainer's block input."""
    rec = {}
    trainer_logits(model, num, hasher, ids, False, rec)
    n = len(ids)
    emb = rec["embed"][0, :n]
    ins = [(emb.unsqueeze(1).expand(n, model.cfg.hc_mult, emb.shape[-1]),
            torch.eye(model.cfg.hc_mult)[0].expand(n, -1))]
    for X, pre in zip(rec["block_out"], rec["block_pre_mix"]):
        ins.append((X[0, :n], pre[0, :n]))
    trace = _Trace()
    oracle.step(oracle.new_state(), list(ids), trace=trace, all_logits=True,
                overrides=lambda layer, step: ins[layer])
    out = []
    for l, r in enumerate(model.cfg.roles):
        got, ref, x_in = ins[l + 1][0], trace.d[("block_out", l)], ins[l][0]
        rel = float((got - ref).pow(2).mean().sqrt() / (ref - x_in).pow(2).mean().sqrt())
        out.append((l, r.role, rel))
    return out


def oracle_logits(oracle, ids, bounded):
    state = oracle.new_state()
    return oracle.step(state, list(ids), bounded=bounded, all_logits=not bounded)


def compare(ref, got):
    rel = float((ref - got).abs().max() / ref.abs().max().clamp_min(1e-30))
    agree = float((ref.argmax(-1) == got.argmax(-1)).float().mean())
    return rel, agree


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids", help="JSON list of id lists (default: random sequences)")
    ap.add_argument("--lengths", default="64,300,700", help="random sequence lengths")
    ap.add_argument("--tol", type=float, default=5e-3)
    a = ap.parse_args(argv)
    cfg = load_model_config(a.model)
    model = Transformer(cfg).eval()
    import_model(model, a.model)
    path = os.path.join(a.model, "engram_map.safetensors")
    hasher = load_hasher(cfg, path if os.path.exists(path) else None)
    num = Numerics(emulate_fp32=True, block=cfg.weight_block)
    oracle = Model(Checkpoint(a.model))
    if a.ids:
        with open(a.ids) as f:
            seqs = json.load(f)
    else:
        rng = np.random.default_rng(0)
        seqs = [list(rng.integers(3, min(cfg.vocab_size, cfg.image_token_id), int(n)))
                for n in a.lengths.split(",")]
    worst = 0.0
    print(f"{'len':>6} {'worst block':>22} {'exact logits':>13} {'argmax':>7} "
          f"{'bounded last':>13} {'argmax':>7}")
    for ids in seqs:
        blocks = per_block_errors(oracle, model, num, hasher, ids)
        l, role, wb = max(blocks, key=lambda x: x[2])
        worst = max(worst, wb)
        row = [f"{len(ids):>6}", f"{wb:>10.2e} (L{l} {role:>7})"]
        for bounded in (False, True):
            ref = oracle_logits(oracle, ids, bounded)
            got = trainer_logits(model, num, hasher, ids, bounded)
            rel, agree = compare(ref, got[-1:] if bounded else got)
            row += [f"{rel:>13.3e}", f"{agree:>7.3f}"]
        print(" ".join(row))
    print(f"worst per-block relative error {worst:.3e} (tolerance {a.tol})")
    return 0 if worst <= a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
