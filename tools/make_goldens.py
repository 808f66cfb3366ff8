#!/usr/bin/env python3
"""Writes the oracle's golden files for a model: a fixed prompt, then greedy decode steps, in
both prefill modes (docs/logits-dump.md format), for the C++ golden tests.

    /usr/bin/python3 tools/make_goldens.py --model DIR --out-dir DIR [--prompt-len 40]
        [--decode 32] [--seed 0] [--dump]
writes OUT/prompt_ids.json, OUT/golden-exact.safetensors, OUT/golden-bounded.safetensors.
The prompt is numpy default_rng(seed).integers(3, vocab_size, prompt_len) (ids 0-2 are the
special tokens of V4.1 configs).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ref_logits  # noqa: E402
from flashdesk_ref.config import load_config  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="Golden logits of the PyTorch oracle")
    ap.add_argument("--model", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--prompt-len", type=int, default=40)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dump", action="store_true", help="include the per-block tensors (large)")
    args = ap.parse_args(argv)
    cfg = load_config(args.model)
    ids = np.random.default_rng(args.seed).integers(3, cfg.vocab_size, size=args.prompt_len).tolist()
    os.makedirs(args.out_dir, exist_ok=True)
    ids_path = os.path.join(args.out_dir, "prompt_ids.json")
    with open(ids_path, "w") as f:
        json.dump(ids, f)
        f.write("\n")
    for mode in ("exact", "bounded"):
        out = os.path.join(args.out_dir, f"golden-{mode}.safetensors")
        ref_logits.main(["--model", args.model, "--ids", ids_path, "--decode", str(args.decode),
                         "--prefill", mode, "--out", out] + (["--dump"] if args.dump else []))
        print(f"make_goldens: wrote {out}")


if __name__ == "__main__":
    main()
