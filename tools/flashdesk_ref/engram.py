"""Engram: conditional n-gram memory added to the hc streams before a block (docs/model-spec.md §7,
docs/numerics.md "Engram")."""
import torch

from . import ops


class Engram:
    def __init__(self, cfg, layer, weights, table, R):
        self.cfg, self.R, self.table = cfg, R, table
        p = f"layers.{layer}.engram."
        self.w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
        self.qk = self.w["q_weight"] * self.w["k_weight"]                   # [hc, dim] FP32

    def forward(self, X, hash_ids, dead_rows):
        """X [R, hc, dim], hash_ids [R, cols] (offsets included), dead_rows [R] bool."""
        cfg, R = self.cfg, self.R
        hc, dim = X.shape[-2], X.shape[-1]
        rows = self.table.gather(hash_ids.cpu()).to(X.device).flatten(-2)                     # [R, cols*head_dim]
        kv = ops.fp8_linear(R, R.bf16(rows), self.w["wkv.weight"])         # [R, (hc+1)*dim]
        key = kv[:, :hc * dim].unflatten(-1, (hc, dim))
        value = kv[:, hc * dim:]
        eps = cfg.rms_norm_eps
        dot = R.sum(X * self.qk * key, -1)
        dot = dot * torch.rsqrt(R.mean(X.square(), -1) + eps) * torch.rsqrt(R.mean(key.square(), -1) + eps)
        dot = dot * dim ** -0.5
        gate = torch.sigmoid(torch.sign(dot) * torch.sqrt(dot.abs().clamp_min(1e-6)))
        gate = gate.masked_fill(dead_rows[:, None], 0.0)
        return R.bf16(X + gate[..., None] * value[:, None, :])
