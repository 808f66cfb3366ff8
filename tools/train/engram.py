"""Engram (docs/model-spec.md §7, docs/numerics.md §Engram): vectorised n-gram hash ids on the
device and the gated memory update of the hc streams.

Hash inputs come from engram_map.safetensors (token_map I64 [n_tokens]: compressed token ids;
multipliers I64 [n_engram_layers, max_ngram]); primes and offsets from the oracle's
tools/flashdesk_ref/engram_hash.py, which also computes the same ids token by token (tested).
"""
import numpy as np
import torch
import torch.nn as nn
from flashdesk_ref.engram_hash import engram_offsets, engram_primes

from . import quant
from .common import Weight

F32 = torch.float32


class EngramHasher:
    """Row ids of every Engram layer for a batch of token ids, computed with int64 tensor ops."""

    def __init__(self, cfg, token_map, multipliers):
        self.max_ngram, self.n_heads = cfg.engram_max_ngram_size, cfg.engram_n_heads
        primes = engram_primes(cfg.engram_vocab_size, self.max_ngram, self.n_heads,
                               len(cfg.engram_layer_ids))
        flat = primes.reshape(len(primes), -1)
        offsets = engram_offsets(primes).reshape(len(primes), -1)
        rows = flat.sum(axis=1)
        if list(rows) != list(cfg.engram_num_embeddings):
            raise ValueError(f"engram_num_embeddings {cfg.engram_num_embeddings} != prime sums "
                             f"{list(rows)}")
        self.primes = torch.from_numpy(flat)          # [n_layers, (max_ngram-1)*n_heads]
        self.offsets = torch.from_numpy(offsets)
        self.token_map = torch.from_numpy(np.array(token_map, np.int64))
        self.multipliers = torch.from_numpy(np.array(multipliers, np.int64))
        self.pad = int(self.token_map[cfg.engram_pad_token_id])
        self._device = torch.device("cpu")

    def to(self, device):
        for name in ("primes", "offsets", "token_map", "multipliers"):
            setattr(self, name, getattr(self, name).to(device))
        self._device = device
        return self

    def shifted(self, ids, dead):
        """[B, N, max_ngram] compressed ids c[p-k]: pad from the first shift that reaches before
        position 0 or at/after a dead (image) token."""
        c = self.token_map[ids]
        B, N = ids.shape
        out, alive = [], torch.ones_like(ids, dtype=torch.bool)
        for k in range(self.max_ngram):
            ck = torch.full_like(c, self.pad)
            dk = torch.ones_like(dead)
            if k < N:
                ck[:, k:] = c[:, :N - k]
                dk[:, k:] = dead[:, :N - k]
            alive = alive & ~dk
            out.append(torch.where(alive, ck, torch.full_like(ck, self.pad)))
        return torch.stack(out, dim=-1)

    def hash_ids(self, ids, dead):
        """int64 [B, N, n_layers, (max_ngram-1)*n_heads] row ids, n-gram size major, head
        minor, offsets included."""
        s = self.shifted(ids, dead)
        per_layer = []
        for e in range(self.multipliers.shape[0]):
            mu = self.multipliers[e]
            h = s[..., 0] * mu[0]
            cols = []
            for k in range(1, self.max_ngram):
                h = torch.bitwise_xor(h, s[..., k] * mu[k])
                cols.append(h.unsqueeze(-1).expand(*h.shape, self.n_heads))
            hk = torch.cat(cols, dim=-1)                            # [B, N, (n-1)*heads]
            per_layer.append(hk % self.primes[e] + self.offsets[e])
        return torch.stack(per_layer, dim=2)


class Engram(nn.Module):
    """One Engram layer: table rows (FP8 per-32 in the checkpoint) -> wkv (FP8 linear) -> per
    stream gated add of the value to the streams."""

    def __init__(self, cfg, rows):
        super().__init__()
        self.hc, self.dim = cfg.hc_mult, cfg.hidden_size
        self.eps = cfg.rms_norm_eps
        width = (cfg.engram_max_ngram_size - 1) * cfg.engram_n_heads * cfg.engram_head_dim
        self.embed = nn.Embedding(rows, cfg.engram_head_dim)
        self.wkv = Weight(self.dim * (self.hc + 1), width)
        self.q_weight = nn.Parameter(torch.ones(self.hc, self.dim))
        self.k_weight = nn.Parameter(torch.ones(self.hc, self.dim))

    def forward(self, num, X, row_ids, dead):
        """X [B, N, hc, D]; row_ids [B, N, cols] this layer's ids; dead [B, N] -> new X."""
        rows = self.embed.weight[row_ids]                          # [B, N, cols, hd] FP32
        if num.qat:
            rows = quant.act_quant_ste(rows, 32)
        e = num.rb(rows.flatten(-2))
        kv = num.linear_fp8(e, self.wkv.weight).to(F32)
        key = kv[..., :self.hc * self.dim].unflatten(-1, (self.hc, self.dim))
        value = kv[..., self.hc * self.dim:]
        xf = X.to(F32)
        w = num.w_bf16(self.q_weight).to(F32) * num.w_bf16(self.k_weight).to(F32)
        dot = (xf * w * key).sum(-1)
        dot = dot * torch.rsqrt(xf.square().mean(-1) + self.eps) \
            * torch.rsqrt(key.square().mean(-1) + self.eps) * self.dim ** -0.5
        gate = torch.sigmoid(torch.sign(dot) * torch.sqrt(dot.abs().clamp_min(1e-6)))
        gate = gate.masked_fill(dead.unsqueeze(-1), 0.0)
        return num.rb(xf + gate.unsqueeze(-1) * value.unsqueeze(-2))
