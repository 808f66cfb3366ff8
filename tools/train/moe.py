"""MoE of every block (MODEL-REFERENCE §5, docs/numerics.md §MoE): sqrt-softplus gate with
aux-loss-free bias routing (separate text and image biases, updated from the load after each
optimizer step), normalised weights x routed_scaling_factor, FP4 routed experts computed as one
batched GEMM over capacity-padded expert slots, FP8 shared expert, SwiGLU clamp on both.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .common import Weight

F32 = torch.float32


class Gate(nn.Module):
    def __init__(self, cfg, n_experts):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_experts, cfg.hidden_size) * cfg.hidden_size ** -0.5)
        self.register_buffer("bias", torch.zeros(n_experts))
        self.register_buffer("bias_vl", torch.zeros(n_experts))
        # Token counts per expert since the last bias update (text, image): not checkpointed.
        self.register_buffer("load", torch.zeros(2, n_experts), persistent=False)


class SharedExperts(nn.Module):
    def __init__(self, dim, inter):
        super().__init__()
        self.w1 = Weight(inter, dim)
        self.w3 = Weight(inter, dim)
        self.w2 = Weight(dim, inter, std=inter ** -0.5 / 2)


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        E, dim, inter = cfg.n_routed_experts, cfg.hidden_size, cfg.moe_intermediate_size
        self.cfg, self.E, self.k = cfg, E, cfg.num_experts_per_tok
        self.gate = Gate(cfg, E)
        # Routed experts stacked for batched GEMMs; the exporter writes experts.{e}.w1/w2/w3.
        self.experts_w1 = nn.Parameter(torch.randn(E, inter, dim) * dim ** -0.5)
        self.experts_w3 = nn.Parameter(torch.randn(E, inter, dim) * dim ** -0.5)
        self.experts_w2 = nn.Parameter(torch.randn(E, dim, inter) * inter ** -0.5 / 2)
        self.shared_experts = (SharedExperts(dim, cfg.n_shared_experts * inter)
                               if cfg.n_shared_experts else None)
        self.use_checkpoint = False

    def route(self, x, is_image):
        """(ids [T, k], weights [T, k] FP32, scores [T, E]) for tokens x [T, dim]."""
        z = F.linear(x.to(F32), self.gate.weight.to(torch.bfloat16).to(F32)) / self.cfg.gate_temp
        s = torch.sqrt(F.softplus(z))
        bias = torch.where(is_image.unsqueeze(1), self.gate.bias_vl, self.gate.bias)
        ids = (s.detach() + bias).topk(self.k, dim=-1).indices
        w = s.gather(1, ids)
        if self.cfg.norm_topk_prob and self.k > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return ids, w * self.cfg.routed_scaling_factor, s

    def forward(self, num, x, ctx, layer):
        """x [B, N, dim] (after ffn_norm) -> [B, N, dim]; records loads and a balance loss."""
        B, N, dim = x.shape
        xt = x.reshape(B * N, dim)
        img = ctx.is_image.reshape(-1)
        ids, w, s = self.route(xt, img)
        valid = ctx.valid.reshape(-1)
        if self.training:
            self._count(ids, valid, img)
            ctx.moe_stats.append((layer, self._balance(ids, s, ctx.valid)))
        if ctx.record is not None:
            ctx.record.setdefault("expert_ids", {})[layer] = ids.view(B, N, -1)
            ctx.record.setdefault("expert_weights", {})[layer] = w.detach().view(B, N, -1)
        xq = num.act_quant(xt)
        fn = self._experts
        if self.use_checkpoint and torch.is_grad_enabled():
            y = checkpoint(fn, num, xq, ids, w, use_reentrant=False)
        else:
            y = fn(num, xq, ids, w)
        return num.rb(y).view(B, N, dim)

    def _experts(self, num, xq, ids, w):
        """FP32 [T, dim]: sum of the routed experts' outputs (weighted) and the shared one."""
        T, dim = xq.shape
        flat = ids.reshape(-1)
        order = torch.argsort(flat)
        counts = torch.bincount(flat, minlength=self.E)
        cap = int(counts.max())
        sorted_e = flat[order]
        start = torch.cumsum(counts, 0) - counts
        slot = sorted_e * cap + (torch.arange(flat.numel(), device=xq.device) - start[sorted_e])
        tok = torch.div(order, self.k, rounding_mode="floor")
        buf = xq.new_zeros(self.E * cap, dim).index_copy(0, slot, xq[tok]).view(self.E, cap, dim)
        w1, w3, w2 = (num.w_fp4(p) for p in (self.experts_w1, self.experts_w3, self.experts_w2))
        gw = w.new_zeros(self.E * cap).index_copy(0, slot, w.reshape(-1)[order])
        a = self._swiglu(num, torch.bmm(buf, w1.transpose(1, 2)), torch.bmm(buf, w3.transpose(1, 2)))
        a = num.act_quant(num.rb(a * gw.view(self.E, cap, 1)))
        out = num.rb(torch.bmm(a, w2.transpose(1, 2))).view(self.E * cap, dim)
        per_slot = torch.empty(flat.numel(), dim, dtype=out.dtype, device=out.device)
        per_slot = per_slot.index_copy(0, order, out[slot])
        y = per_slot.view(T, self.k, dim).to(F32).sum(1)
        if self.shared_experts is not None:
            se = self.shared_experts
            a = self._swiglu(num, torch.matmul(xq, num.w_fp8(se.w1.weight).t()),
                             torch.matmul(xq, num.w_fp8(se.w3.weight).t()))
            y = y + num.linear_fp8(num.rb(a), se.w2.weight).to(F32)
        return y

    def _swiglu(self, num, g, u):
        """silu(min(g, lim)) * clamp(u, ±lim) in FP32 from the bf16 GEMM outputs."""
        g, u = num.rb(g).to(F32), num.rb(u).to(F32)
        lim = self.cfg.swiglu_limit
        if lim > 0:
            u = u.clamp(-lim, lim)
            g = g.clamp_max(lim)
        return F.silu(g) * u

    @torch.no_grad()
    def _count(self, ids, valid, img):
        for kind, sel in ((0, valid & ~img), (1, valid & img)):
            if sel.any():
                self.gate.load[kind] += torch.bincount(ids[sel].reshape(-1), minlength=self.E).to(F32)

    def _balance(self, ids, s, valid):
        """Sequence-wise balance loss sum_i f_i P_i (DeepSeek-V3 form), averaged over rows."""
        B, N = valid.shape
        vf = valid.to(F32).view(B, N, 1)
        n = vf.sum(1).clamp_min(1)                                            # [B, 1]
        hits = F.one_hot(ids, self.E).sum(1).to(F32).view(B, N, self.E)
        f = (hits * vf).sum(1) * self.E / (self.k * n)
        p = ((s / s.sum(-1, keepdim=True)).view(B, N, self.E) * vf).sum(1) / n
        return (f * p).sum(-1).mean()

    @torch.no_grad()
    def update_bias(self, rate):
        """bias += rate * sign(mean load - load) per kind seen since the last update."""
        for kind, bias in ((0, self.gate.bias), (1, self.gate.bias_vl)):
            load = self.gate.load[kind]
            if load.sum() > 0:
                bias += rate * torch.sign(load.mean() - load)
        self.gate.load.zero_()
