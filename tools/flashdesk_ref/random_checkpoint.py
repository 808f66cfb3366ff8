"""Writes a valid random model directory for any V4.1-style text config: config.json,
model.safetensors (FP8 32x32 UE8M0 dense weights, packed FP4 experts with per-32 E8M0 scales,
BF16 / F32 tensors as docs/model-spec.md §2.4 lists) and engram_map.safetensors (a synthetic
compressed-token map and the numpy multipliers). A second writer next to `flashdesk-cli
make-random`, so the oracle can run before and independently of it.

    /usr/bin/python3 -m flashdesk_ref.random_checkpoint CONFIG.json OUT_DIR [--seed N]
(run from tools/). DSpark stages and the vision tower are not written (refused with a message).
"""
import argparse
import json
import os

import numpy as np

from .config import Config, FULL, REINDEX
from .engram_hash import engram_multipliers, engram_primes
from .formats import (e8m0_ceil_code, f32_to_bf16_bits, f32_to_e2m1_codes, f32_to_e4m3_codes,
                      pack_e2m1)
from .safetensors import write_safetensors

F32 = np.float32


def quantize_fp8_blocks(w, block_rows, block_cols):
    """FP8 E4M3 codes [out, in] and E8M0 scale codes per block_rows x block_cols tile, with the
    act_quant rule: amax floored at 1e-4, scale = 2^ceil(log2(amax * fp32(1/448)))."""
    out, inp = w.shape
    pr, pc = -out % block_rows, -inp % block_cols
    padded = np.pad(w.astype(F32), ((0, pr), (0, pc)))
    tiles = padded.reshape(padded.shape[0] // block_rows, block_rows, padded.shape[1] // block_cols, block_cols)
    amax = np.maximum(np.abs(tiles).max(axis=(1, 3)), F32(1e-4)).astype(F32)
    scale_codes = e8m0_ceil_code((amax * F32(1.0 / 448.0)).astype(F32))
    scale = np.ldexp(F32(1.0), scale_codes.astype(np.int32) - 127).astype(F32)
    full = np.repeat(np.repeat(scale, block_rows, 0), block_cols, 1)[:out, :inp]
    codes = f32_to_e4m3_codes(np.clip(w / full, -448.0, 448.0).astype(F32))
    return codes, scale_codes


def quantize_fp4_rows(w):
    """Packed E2M1 [out, in/2] and E8M0 scale codes [out, in/32] (per 32 inputs along K)."""
    out, inp = w.shape
    blocks = w.astype(F32).reshape(out, inp // 32, 32)
    amax = np.maximum(np.abs(blocks).max(axis=2), F32(6.0 * 2.0 ** -126)).astype(F32)
    scale_codes = e8m0_ceil_code((amax * F32(1.0 / 6.0)).astype(F32))
    scale = np.ldexp(F32(1.0), scale_codes.astype(np.int32) - 127).astype(F32)
    q = np.clip(blocks / scale[:, :, None], -6.0, 6.0).astype(F32).reshape(out, inp)
    return pack_e2m1(f32_to_e2m1_codes(q)), scale_codes


class Writer:
    def __init__(self, cfg, seed):
        self.cfg = cfg
        self.rng = np.random.default_rng(seed)
        self.tensors = {}

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(F32)

    def bf16(self, name, value):
        self.tensors[name] = ("BF16", f32_to_bf16_bits(value))

    def f32(self, name, value):
        self.tensors[name] = ("F32", np.asarray(value, dtype=F32))

    def fp8(self, name, out, inp):
        codes, scales = quantize_fp8_blocks(self.normal((out, inp), inp ** -0.5), 32, 32)
        self.tensors[name + ".weight"] = ("F8_E4M3", codes)
        self.tensors[name + ".scale"] = ("F8_E8M0", scales)

    def fp4(self, name, out, inp):
        packed, scales = quantize_fp4_rows(self.normal((out, inp), inp ** -0.5))
        self.tensors[name + ".weight"] = ("I8", packed)
        self.tensors[name + ".scale"] = ("F8_E8M0", scales)

    def norm(self, name, dim):
        self.bf16(name + ".weight", 1.0 + self.normal((dim,), 0.1))

    def linear_bf16(self, name, out, inp):
        self.bf16(name + ".weight", self.normal((out, inp), inp ** -0.5))

    def hc(self, prefix):
        c = self.cfg
        hc, mixes = c.hc_mult, (2 + c.hc_mult) * c.hc_mult
        self.f32(prefix + "_fn", self.normal((mixes, hc * c.hidden_size), (hc * c.hidden_size) ** -0.5))
        base = self.normal((mixes,), 0.5)
        base[2 * hc:] += (np.eye(hc, dtype=F32) * 2.0).reshape(-1)   # comb starts near identity
        self.f32(prefix + "_base", base)
        self.f32(prefix + "_scale", 0.5 + self.normal((3,), 0.1))

    def write_all(self):
        c = self.cfg
        d = c.hidden_size
        self.bf16("embed.weight", self.normal((c.vocab_size, d), 1.0))
        self.bf16("head.weight", self.normal((c.vocab_size, d), d ** -0.5))
        self.norm("norm", d)
        for role in c.roles:
            self.layer(role)

    def layer(self, role):
        c = self.cfg
        d, hd, H = c.hidden_size, c.head_dim, c.num_attention_heads
        p = f"layers.{role.layer}."
        self.norm(p + "attn_norm", d)
        self.norm(p + "ffn_norm", d)
        self.hc(p + "hc_attn")
        self.hc(p + "hc_ffn")
        a = p + "attn."
        self.fp8(a + "wq_a", c.q_lora_rank, d)
        self.norm(a + "q_norm", c.q_lora_rank)
        self.fp8(a + "wq_b", H * hd, c.q_lora_rank)
        self.fp8(a + "wkv", hd, d)
        self.norm(a + "kv_norm", hd)
        self.fp8(a + "wo_a", c.o_groups * c.o_lora_rank, H * hd // c.o_groups)
        self.fp8(a + "wo_b", d, c.o_groups * c.o_lora_rank)
        self.f32(a + "attn_sink", self.normal((H,), 1.0))
        if role.role == FULL:
            self.linear_bf16(a + "compressor.wkv", hd, d)
            if role.ratio > 1:
                self.linear_bf16(a + "compressor.wgate", hd, d)
            self.norm(a + "compressor.norm", hd)
            self.linear_bf16(a + "indexer.wk", c.index_head_dim, hd)
            self.norm(a + "indexer.k_norm", c.index_head_dim)
        if role.role in (FULL, REINDEX):
            self.fp8(a + "indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank)
            self.linear_bf16(a + "indexer.weights_proj", c.index_n_heads, d)
        self.moe(p + "ffn.")
        if role.engram:
            self.engram(p + "engram.", c.engram_layer_ids.index(role.layer))

    def moe(self, f):
        c = self.cfg
        d, inter, E = c.hidden_size, c.moe_intermediate_size, c.n_routed_experts
        self.linear_bf16(f + "gate", E, d)
        self.f32(f + "gate.bias", self.normal((E,), 0.1))
        self.f32(f + "gate.bias_vl", self.normal((E,), 0.1))
        for e in range(E):
            self.fp4(f + f"experts.{e}.w1", inter, d)
            self.fp4(f + f"experts.{e}.w3", inter, d)
            self.fp4(f + f"experts.{e}.w2", d, inter)
        if c.n_shared_experts:
            shared = inter * c.n_shared_experts
            self.fp8(f + "shared_experts.w1", shared, d)
            self.fp8(f + "shared_experts.w3", shared, d)
            self.fp8(f + "shared_experts.w2", d, shared)

    def engram(self, g, e):
        c = self.cfg
        rows, ehd = c.engram_num_embeddings[e], c.engram_head_dim
        table = self.normal((rows, ehd), 1.0)
        codes, scales = quantize_fp8_blocks(table, 1, 32)
        self.tensors[g + "embed.weight"] = ("F8_E4M3", codes)
        self.tensors[g + "embed.scale"] = ("F8_E8M0", scales)
        cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads * ehd
        self.fp8(g + "wkv", c.hidden_size * (c.hc_mult + 1), cols)
        self.bf16(g + "q_weight", 1.0 + self.normal((c.hc_mult, c.hidden_size), 0.1))
        self.bf16(g + "k_weight", 1.0 + self.normal((c.hc_mult, c.hidden_size), 0.1))


def synthetic_token_map(n_tokens, compressed_size, rng):
    """Every compressed id used at least once (ids below compressed_size map to themselves),
    the rest merged onto random earlier ids, as case/space variants would be."""
    token_map = np.arange(n_tokens, dtype=np.int64)
    extra = np.arange(compressed_size, n_tokens)
    token_map[extra] = rng.integers(0, compressed_size, size=extra.size)
    return token_map


def check_config(cfg):
    if cfg.num_nextn_predict_layers:
        raise SystemExit("random_checkpoint: DSpark stages (num_nextn_predict_layers > 0) are not written")
    if cfg.vision:
        raise SystemExit("random_checkpoint: the vision tower (vision_config) is not written")
    if cfg.engram_layer_ids:
        primes = engram_primes(cfg.engram_vocab_size, cfg.engram_max_ngram_size, cfg.engram_n_heads,
                               len(cfg.engram_layer_ids))
        rows = [int(r) for r in primes.reshape(len(cfg.engram_layer_ids), -1).sum(axis=1)]
        if rows != list(cfg.engram_num_embeddings):
            raise SystemExit(f"random_checkpoint: engram_num_embeddings {cfg.engram_num_embeddings} "
                             f"disagree with the primes of engram_vocab_size: {rows}")
        if cfg.engram_compressed_vocab_size > cfg.vocab_size:
            raise SystemExit("random_checkpoint: engram_compressed_vocab_size exceeds vocab_size")


def write_random_checkpoint(config_path, out_dir, seed=0):
    with open(config_path, "r", encoding="utf-8") as f:
        raw = json.load(f)
    raw.setdefault("name", os.path.splitext(os.path.basename(config_path))[0])
    cfg = Config(raw, where=config_path)
    check_config(cfg)
    os.makedirs(out_dir, exist_ok=True)
    writer = Writer(cfg, seed)
    writer.write_all()
    write_safetensors(os.path.join(out_dir, "model.safetensors"), writer.tensors,
                      {"format": "pt", "writer": "flashdesk_ref.random_checkpoint", "seed": seed})
    if cfg.engram_layer_ids:
        token_map = synthetic_token_map(cfg.vocab_size, cfg.engram_compressed_vocab_size,
                                        np.random.default_rng(seed + 1))
        mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size,
                                  cfg.engram_compressed_vocab_size)
        write_safetensors(os.path.join(out_dir, "engram_map.safetensors"),
                          {"token_map": ("I64", token_map), "multipliers": ("I64", mult)},
                          {"source": "synthetic (random checkpoint)"})
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(raw, f, indent=2)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    write_random_checkpoint(args.config, args.out_dir, args.seed)


if __name__ == "__main__":
    main()
