#!/usr/bin/env python3
"""Builds engram_map.safetensors (token_map I64 [len(tokenizer)], multipliers I64
[n_engram_layers, max_ngram]) for a model from its tokenizer.json (numpy only).

    python3 tools/engram_map.py --tokenizer tokenizer.json --model DIR      # writes DIR/engram_map.safetensors
    python3 tools/engram_map.py --tokenizer tokenizer.json --config config.json --out FILE
    python3 tools/engram_map.py --tokenizer tokenizer.json --summary   # sizes and SHA-256, as JSON

--summary prints {"entries", "compressed_vocab_size", "token_map_sha256"} (SHA-256 of the map as
little-endian int64): what tests/engine/compressed_token_map_test.cpp checks the engine's own
build against (tests/data/tokenizers/*/engram_map_summary.json).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashdesk_ref.config import Config  # noqa: E402
from flashdesk_ref.engram_hash import engram_multipliers  # noqa: E402
from flashdesk_ref.safetensors import FormatError, write_safetensors  # noqa: E402
from flashdesk_ref.token_map import TokenizerJson, compressed_token_map  # noqa: E402


def build(tokenizer_path, cfg):
    """(token_map int64 [n], multipliers int64 [layers, max_ngram]); raises ValueError when the
    tokenizer's compressed vocabulary disagrees with engram_compressed_vocab_size."""
    token_map, size = compressed_token_map(TokenizerJson(tokenizer_path))
    if size != cfg.engram_compressed_vocab_size:
        raise ValueError(f"{tokenizer_path}: {size} compressed tokens, but the config says "
                         f"engram_compressed_vocab_size = {cfg.engram_compressed_vocab_size} "
                         "(every hash multiplier depends on it)")
    mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size, size)
    return np.array(token_map, dtype=np.int64), mult


def summary(tokenizer_path):
    token_map, size = compressed_token_map(TokenizerJson(tokenizer_path))
    data = np.array(token_map, dtype="<i8").tobytes()
    return {"entries": len(token_map), "compressed_vocab_size": size,
            "token_map_sha256": hashlib.sha256(data).hexdigest(),
            "command": "/usr/bin/python3 tools/engram_map.py --tokenizer TOKENIZER --summary"}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Build Engram's compressed-token map and multipliers")
    ap.add_argument("--tokenizer", required=True, help="HF tokenizer.json (byte-level BPE)")
    ap.add_argument("--model", help="model directory: reads its config.json, writes engram_map.safetensors there")
    ap.add_argument("--config", help="config.json (with --out)")
    ap.add_argument("--out", help="output file (default: MODEL/engram_map.safetensors)")
    ap.add_argument("--summary", action="store_true",
                    help="print the map's size and SHA-256 as JSON instead of writing it")
    args = ap.parse_args(argv)
    if args.summary:
        try:
            print(json.dumps(summary(args.tokenizer), indent=1))
        except (OSError, ValueError) as e:
            print(f"engram_map: {e}", file=sys.stderr)
            return 1
        return 0
    config_path = args.config or (os.path.join(args.model, "config.json") if args.model else None)
    out = args.out or (os.path.join(args.model, "engram_map.safetensors") if args.model else None)
    if not config_path or not out:
        ap.error("give --model DIR, or --config FILE and --out FILE")
    try:
        with open(config_path, "r", encoding="utf-8") as f:
            cfg = Config(json.load(f), where=config_path)
        if not cfg.engram_layer_ids:
            raise ValueError(f"{config_path}: the model has no Engram layers")
        token_map, mult = build(args.tokenizer, cfg)
    except (OSError, ValueError, FormatError) as e:
        print(f"engram_map: {e}", file=sys.stderr)
        return 1
    write_safetensors(out, {"token_map": ("I64", token_map), "multipliers": ("I64", mult)},
                      {"source": os.path.basename(args.tokenizer),
                       "compressed_vocab_size": int(token_map.max()) + 1})
    print(f"engram_map: {len(token_map)} ids -> {int(token_map.max()) + 1} compressed ids; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
