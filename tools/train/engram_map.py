"""Loads the Engram hash inputs of a model: engram_map.safetensors (token_map I64 [n_tokens],
multipliers I64 [n_engram_layers, max_ngram]) as written by tools/engram_map.py, or a stand-in
map for raw-id toy runs (id mod engram_compressed_vocab_size, real multiplier rule)."""
import numpy as np

from flashdesk_ref.engram_hash import engram_multipliers
from flashdesk_ref.safetensors import SafeTensorsFile, write_safetensors

from .engram import EngramHasher


def load_hasher(cfg, path=None, tokenizer=None):
    """From an engram_map.safetensors file, else built from a tokenizer.json with the oracle's
    builder (tools/engram_map.py), else the raw-id stand-in."""
    if not cfg.engram_layer_ids:
        return None
    if path is None and tokenizer is not None:
        import engram_map as builder  # tools/engram_map.py
        token_map, mult = builder.build(tokenizer, cfg)
        return EngramHasher(cfg, token_map, mult)
    if path is None:
        token_map = np.arange(cfg.vocab_size) % cfg.engram_compressed_vocab_size
        mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size,
                                  cfg.engram_compressed_vocab_size)
        return EngramHasher(cfg, token_map, mult)
    f = SafeTensorsFile(path)
    token_map, mult = f.get("token_map"), f.get("multipliers")
    if token_map.max() >= cfg.engram_compressed_vocab_size:
        raise ValueError(f"{path}: token_map ids exceed engram_compressed_vocab_size")
    if len(token_map) < cfg.vocab_size:
        token_map = np.concatenate([token_map, np.full(cfg.vocab_size - len(token_map),
                                                       token_map[cfg.engram_pad_token_id])])
    return EngramHasher(cfg, token_map, mult)


def write_stand_in_map(path, cfg):
    """engram_map.safetensors for a toy model (the exporter ships one with every model)."""
    h = load_hasher(cfg)
    write_safetensors(path, {"token_map": ("I64", h.token_map.numpy()),
                             "multipliers": ("I64", h.multipliers.numpy())})
