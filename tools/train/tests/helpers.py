"""Shared fixtures of the trainer tests: paths, the every-role config, a stand-in Engram hasher,
random samples."""
import os
import sys

import numpy as np

TOOLS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = os.path.dirname(TOOLS)
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

from train.batch import Sample  # noqa: E402
from train.config import load_model_config  # noqa: E402
from flashdesk_ref.engram_hash import engram_multipliers  # noqa: E402
from train.engram import EngramHasher  # noqa: E402

EVERY_ROLE = os.path.join(REPO, "assets", "configs", "test-every-role.json")


def every_role_config(**overrides):
    import json
    from train.config import ModelConfig
    with open(EVERY_ROLE) as f:
        raw = json.load(f)
    raw["text_config"].update(overrides)
    return ModelConfig(raw, where=EVERY_ROLE)


MICRO = dict(hidden_size=64, head_dim=64, qk_rope_head_dim=32, q_lora_rank=32, o_lora_rank=32,
             moe_intermediate_size=32, index_head_dim=32)


def micro_config(vision=False):
    """The every-role layer layout with small widths, so CPU tests run in seconds."""
    import json
    from train.config import ModelConfig
    with open(EVERY_ROLE) as f:
        raw = json.load(f)
    raw["text_config"].update(MICRO)
    if vision:
        raw["image_token_id"] = 511
        raw["vision_config"] = dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=1,
                                    intermediate_size=64, patch_size=14, downsample_ratio=3)
    return ModelConfig(raw, where=EVERY_ROLE + " (micro widths)")


def stand_in_hasher(cfg):
    """Token map id % compressed vocab (a stand-in for the tokenizer's map) and the real
    multiplier rule."""
    token_map = np.arange(cfg.vocab_size) % cfg.engram_compressed_vocab_size
    mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size,
                              cfg.engram_compressed_vocab_size)
    return EngramHasher(cfg, token_map, mult)


def random_samples(n, lo, hi, vocab, seed=0, answer_frac=0.5):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        L = int(rng.integers(lo, hi))
        ids = rng.integers(3, vocab, L).astype(np.int64)
        P = int(L * answer_frac)
        tgt = np.zeros(L, bool)
        tgt[P:] = True
        out.append(Sample("random", ids, tgt, P))
    return out
