"""CSA2 attention of one layer in any role (docs/model-spec.md §3.1, §3.5-3.7): query, window KV
(FP8), the compressor of KV sources (ratio 2 per-channel softmax pairs in FP32, ratio 1 per
token; FP4 main KV after RoPE), index keys (FP4), the indexer of index sources (candidates,
Reindex restriction, top-k), sparse attention with the sink, inverse RoPE, grouped wo_a, wo_b.

Indexer inputs are detached: the indexer learns only from the distillation loss.
"""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from . import indexer as ix
from .regions import region
from .common import Norm, Weight
from .config import FULL, REINDEX, WINDOW
from .context import IndexState, Selection
from .rope import apply_rope
from .sparse_attention import attention_core

F32 = torch.float32


class Compressor(nn.Module):
    def __init__(self, cfg, ratio):
        super().__init__()
        D = cfg.head_dim
        self.ratio = ratio
        self.wkv = Weight(D, cfg.hidden_size)
        self.wgate = Weight(D, cfg.hidden_size) if ratio > 1 else None
        self.norm = Norm(D)


class IndexerParams(nn.Module):
    def __init__(self, cfg, owns_keys, owns_query):
        super().__init__()
        nh, d = cfg.index_n_heads, cfg.index_head_dim
        if owns_keys:
            self.wk = Weight(d, cfg.head_dim)
            self.k_norm = Norm(d)
        if owns_query:
            self.wq_b = Weight(nh * d, cfg.q_lora_rank)
            self.weights_proj = Weight(nh, cfg.hidden_size)


class Attention(nn.Module):
    def __init__(self, cfg, role):
        super().__init__()
        self.cfg, self.role = cfg, role
        H, D, dim = cfg.num_attention_heads, cfg.head_dim, cfg.hidden_size
        self.H, self.D = H, D
        self.wq_a = Weight(cfg.q_lora_rank, dim)
        self.q_norm = Norm(cfg.q_lora_rank)
        self.wq_b = Weight(H * D, cfg.q_lora_rank)
        self.wkv = Weight(D, dim)
        self.kv_norm = Norm(D)
        G = cfg.o_groups
        self.wo_a = Weight(G * cfg.o_lora_rank, H * D // G)
        self.wo_b = Weight(dim, G * cfg.o_lora_rank, std=(G * cfg.o_lora_rank) ** -0.5 / 2)
        self.attn_sink = nn.Parameter(torch.zeros(H))
        owns_keys = role.role == FULL
        owns_query = role.role in (FULL, REINDEX)
        if owns_keys:
            self.compressor = Compressor(cfg, role.ratio)
        if owns_keys or owns_query:
            self.indexer = IndexerParams(cfg, owns_keys, owns_query)
        self.use_checkpoint = False

    def forward(self, num, x, ctx):
        """x [B, N, dim] attention input (after attn_norm) -> [B, N, dim]."""
        cfg, r = self.cfg, self.role
        B, N, _ = x.shape
        eps = cfg.rms_norm_eps
        cos, sin = ctx.rope.get(r.ratio > 0, N, x.device)
        xq = num.act_quant(x)
        qr = num.rms_norm(num.linear_fp8_q(xq, self.wq_a.weight), self.q_norm.weight, eps)
        qrq = num.act_quant(qr)
        q = num.linear_fp8_q(qrq, self.wq_b.weight).view(B, N, self.H, self.D)
        q = apply_rope(num, q, cos.unsqueeze(1), sin.unsqueeze(1))
        kv = num.rms_norm(num.linear_fp8_q(xq, self.wkv.weight), self.kv_norm.weight, eps)
        kv = num.kv_fp8(apply_rope(num, kv, cos, sin))
        comp = {}
        if r.role != WINDOW:
            if r.role == FULL:
                with region("attention.compress"):
                    self._compress(num, x, ctx, cos, sin)
            if r.role in (FULL, REINDEX):
                with region("attention.indexer"):
                    self._index(num, x, qrq, ctx, cos, sin)
            kvc, _ = ctx.kv[r.kv_source]
            sel = ctx.sel[r.index_source]
            comp = dict(kvc=kvc, idx=sel.idx, valid=sel.valid, n_vis=ctx.n_visible(r.ratio))
        lo = ctx.lo_decoder if r.decoder else ctx.lo_encoder
        args = (q, kv, lo, self.attn_sink, ctx.window)
        with region("attention.core"):
            if self.use_checkpoint and torch.is_grad_enabled():
                o, probs = checkpoint(_core, *args, comp, use_reentrant=False)
            else:
                o, probs = _core(*args, comp)
        if probs is not None and ctx.distill and r.index_source in ctx.index_state:
            st = ctx.index_state[r.index_source]
            st.target = probs if st.target is None else st.target + probs
        o = apply_rope(num, num.rb(o), cos.unsqueeze(1), sin.unsqueeze(1), inverse=True)
        G = cfg.o_groups
        wo_a = num.w_fp8(self.wo_a.weight).view(G, cfg.o_lora_rank, -1)
        z = num.rb(torch.einsum("bngi,goi->bngo", o.reshape(B, N, G, -1), wo_a))
        return num.linear_fp8(z.flatten(2), self.wo_b.weight)

    def _compress(self, num, x, ctx, cos, sin):
        """Stores this KV source's compressed entries (FP4 E4M3-16 after RoPE) and index keys
        (FP4 E8M0-32 after RoPE) in ctx.kv; entry j sits at position j*m."""
        c, m, eps = self.compressor, self.role.ratio, self.cfg.rms_norm_eps
        B, N, _ = x.shape
        E = N // m
        if m == 1:
            lat = num.rms_norm(num.linear_bf16(x, c.wkv.weight), c.norm.weight, eps)
        else:
            kv = num.linear_f32(x[:, :E * m], c.wkv.weight).view(B, E, m, -1)
            score = num.linear_f32(x[:, :E * m], c.wgate.weight).view(B, E, m, -1)
            lat = num.rb((torch.softmax(score, dim=2) * kv).sum(2))
            lat = num.rms_norm(lat, c.norm.weight, eps)
        cc, sc = cos[::m][:E], sin[::m][:E]
        kvc = num.kv_fp4(apply_rope(num, lat, cc, sc))
        ixp = self.indexer
        ik = num.rms_norm(num.linear_bf16(lat.detach(), ixp.wk.weight), ixp.k_norm.weight, eps)
        ik = num.index_fp4(apply_rope(num, ik, cc, sc))
        ctx.kv[self.role.layer] = (kvc, ik)
        if ctx.record is not None:
            ctx.record[f"compress_kv.layer{self.role.layer}"] = kvc.detach()
            ctx.record[f"index_k.layer{self.role.layer}"] = ik.detach()

    def _index(self, num, x, qrq, ctx, cos, sin):
        """Runs this index source: scores, candidates, selection -> ctx.sel / ctx.index_state.
        qrq: the act_quant'ed query latent (shared with wq_b)."""
        cfg, r = self.cfg, self.role
        B, N, _ = x.shape
        nh, d = cfg.index_n_heads, cfg.index_head_dim
        _, ik = ctx.kv[r.kv_source]
        ixp = self.indexer
        qi = num.linear_fp8_q(qrq.detach(), ixp.wq_b.weight).view(B, N, nh, d)
        qi = num.index_fp4(apply_rope(num, qi, cos.unsqueeze(1), sin.unsqueeze(1)))
        # official weights: bf16(bf16(weights_proj(x)) * float(d^-1/2 nh^-1/2)) (a BF16 tensor
        # times a Python float stays BF16)
        w = num.rb(num.linear_bf16(x.detach(), ixp.weights_proj.weight) * (d ** -0.5 * nh ** -0.5))
        w = w.to(F32)
        n_vis = ctx.n_visible(r.ratio)
        if ctx.dense and not ctx.record:
            sel = Selection(None, None)
        else:
            scores = ix.index_scores(qi, ik, w, n_vis)
            # checks: torch's CPU tie choice over rows as wide as each sequence's real entries
            widths = ctx.real_entries(r.ratio) if ctx.cpu_topk else None
            if r.builds_candidates:
                ctx.cand[r.layer] = ix.candidate_mask(scores, n_vis, cfg.candidate_block_size,
                                                      cfg.candidate_topk_blocks, ctx.cpu_topk, widths)
            if r.candidate_source >= 0:
                scores = scores.masked_fill(~ctx.cand[r.candidate_source], float("-inf"))
            k = min(cfg.index_topk, ik.shape[1])
            idx, valid = ix.select_topk(scores, k, n_vis, ctx.cpu_topk, widths)
            sel = Selection(None, None) if ctx.dense else Selection(idx, valid)
            if ctx.record is not None:
                ctx.record[f"topk_idxs.layer{r.layer}"] = torch.where(valid, idx, -1)
                if r.builds_candidates:
                    ctx.record[f"candidates.layer{r.layer}"] = ctx.cand[r.layer]
        ctx.sel[r.layer] = sel
        if ctx.distill and torch.is_grad_enabled():
            ctx.index_state[r.layer] = IndexState(qi, ik, w, sel, r.ratio)


def _core(q, kv, lo, sink, W, comp):
    return attention_core(q, kv, lo, sink, W, **comp)
