"""MoE of every block (docs/model-spec.md §5, docs/numerics.md §MoE): sqrt-softplus gate with
aux-loss-free bias routing (separate text and image biases, updated from the load after each
optimizer step), normalised weights x routed_scaling_factor, FP4 routed experts (token-expert
pairs sorted by expert, one GEMM per expert), FP8 shared expert, SwiGLU clamp on both.
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
        self.impl = "sorted"   # "sorted": GEMMs per expert on its tokens; "dense": every expert
        #                        on every token, weight 0 where not routed (no host syncs; for
        #                        small experts on a GPU the extra FLOPs are cheaper than syncs)

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
        """x [B, N, dim] (after ffn_norm) -> [B, N, dim]; padding rows are not routed (zero
        output); records loads and a balance loss."""
        B, N, dim = x.shape
        rows = ctx.valid_rows
        xt = x.reshape(B * N, dim).index_select(0, rows)
        img = ctx.is_image.reshape(-1)[rows]
        ids, w, s = self.route(xt, img)
        if self.training:
            self._count(ids, img)
            ctx.moe_stats.append((layer, self._balance(ids, s, ctx.valid, rows)))
        if ctx.record is not None:
            full = torch.full((B * N, self.k), -1, dtype=ids.dtype, device=ids.device)
            ctx.record.setdefault("expert_ids", {})[layer] = full.index_copy(0, rows, ids).view(B, N, -1)
            fw = torch.zeros(B * N, self.k, device=w.device).index_copy(0, rows, w.detach())
            ctx.record.setdefault("expert_weights", {})[layer] = fw.view(B, N, -1)
        xq = num.act_quant(xt)
        fn = self._experts_dense if self.impl == "dense" else self._experts
        if self.use_checkpoint and torch.is_grad_enabled():
            y = checkpoint(fn, num, xq, ids, w, use_reentrant=False)
        else:
            y = fn(num, xq, ids, w)
        out = x.new_zeros(B * N, dim).index_copy(0, rows, num.rb(y).to(x.dtype))
        return out.view(B, N, dim)

    def _experts(self, num, xq, ids, w):
        """FP32 [T, dim]: sum of the routed experts' outputs (weighted) and the shared one.
        Token-expert pairs are sorted by expert; one GEMM per expert on its contiguous slice."""
        T, dim = xq.shape
        flat = ids.reshape(-1)
        order = torch.argsort(flat)
        counts = torch.bincount(flat, minlength=self.E).tolist()
        xs = xq[torch.div(order, self.k, rounding_mode="floor")]
        w13 = num.w_fp4(torch.cat((self.experts_w1, self.experts_w3), dim=1))   # [E, 2I, dim]
        w2 = num.w_fp4(self.experts_w2)
        h = torch.cat([num.qmm(part, w13[e])
                       for e, part in enumerate(torch.split(xs, counts)) if counts[e]])
        g, u = h.chunk(2, dim=-1)
        a = self._swiglu(num, g, u) * w.reshape(-1)[order].unsqueeze(1)
        a = num.act_quant(num.rb(a))
        out = torch.cat([num.qmm(part, w2[e])
                         for e, part in enumerate(torch.split(a, counts)) if counts[e]])
        rounded = num.rb(out)
        per_pair = torch.empty_like(rounded).index_copy(0, order, rounded)
        y = per_pair.view(T, self.k, dim).to(F32).sum(1)
        if self.shared_experts is not None:
            se = self.shared_experts
            a = self._swiglu(num, num.qmm(xq, num.w_fp8(se.w1.weight)),
                             num.qmm(xq, num.w_fp8(se.w3.weight)))
            y = y + num.linear_fp8(num.rb(a), se.w2.weight).to(F32)
        return y

    def _experts_dense(self, num, xq, ids, w):
        """Same values as _experts: routed weight 0 for the experts a token does not use."""
        T, dim = xq.shape
        E = self.E
        gates = torch.zeros(T, E, dtype=F32, device=xq.device).scatter(1, ids, w)
        w13 = num.w_fp4(torch.cat((self.experts_w1, self.experts_w3), dim=1))    # [E, 2I, dim]
        h = num.qmm(xq, w13.reshape(-1, dim)).view(T, E, -1)                    # [T, E, 2I]
        g, u = h.chunk(2, dim=-1)
        a = num.act_quant(num.rb(self._swiglu(num, g, u) * gates.unsqueeze(-1)))
        out = num.qmm(a.transpose(0, 1), num.w_fp4(self.experts_w2))           # [E, T, dim]
        y = num.rb(out).to(F32).sum(0)
        if self.shared_experts is not None:
            se = self.shared_experts
            a = self._swiglu(num, num.qmm(xq, num.w_fp8(se.w1.weight)),
                             num.qmm(xq, num.w_fp8(se.w3.weight)))
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
    def _count(self, ids, img):
        """Adds this batch's routed tokens per expert to the text (0) and image (1) loads."""
        kind = img.long().unsqueeze(1).expand_as(ids)
        self.gate.load.view(-1).index_add_(0, (kind * self.E + ids).reshape(-1),
                                           torch.ones(ids.numel(), device=ids.device))

    def _balance(self, ids, s, valid, rows):
        """Sequence-wise balance loss sum_i f_i P_i (DeepSeek-V3 form), averaged over rows;
        ids/s are of the valid tokens `rows` (flat indices into [B, N])."""
        B, N = valid.shape
        row_of = torch.div(rows, N, rounding_mode="floor")
        n = valid.sum(1).clamp_min(1).to(F32).unsqueeze(1)                   # [B, 1]
        hits = torch.zeros(B, self.E, device=s.device).index_add_(
            0, row_of, F.one_hot(ids, self.E).sum(1).to(F32))
        p = torch.zeros(B, self.E, device=s.device).index_add(
            0, row_of, s / s.sum(-1, keepdim=True))
        f = hits * self.E / (self.k * n)
        return (f * p / n).sum(-1).mean()

    @torch.no_grad()
    def update_bias(self, rate):
        """bias += rate * sign(mean load - load) per kind seen since the last update."""
        for kind, bias in ((0, self.gate.bias), (1, self.gate.bias_vl)):
            load = self.gate.load[kind]
            bias += rate * torch.sign(load.mean() - load) * (load.sum() > 0)
        self.gate.load.zero_()
