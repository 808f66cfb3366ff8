"""Mixture of experts with bias routing (docs/model-spec.md §5, docs/numerics.md "MoE")."""
import torch
import torch.nn.functional as F

from . import ops


class MoE:
    def __init__(self, cfg, layer, weights, R):
        self.cfg, self.R = cfg, R
        p = f"layers.{layer}.ffn."
        self.w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
        self.k = cfg.num_experts_per_tok
        self.limit = float(cfg.swiglu_limit)

    def route(self, x, image_rows):
        """Expert ids [R, k] and weights [R, k] as the official Gate picks them: torch.topk of
        the biased scores (its order, ties included), the unbiased scores in that order,
        normalised by torch's FP32 sum of them (the official `weights.sum(dim=-1)`)."""
        z = ops.f32_linear(self.R, x, self.w["gate.weight"]) / self.cfg.gate_temp
        s = torch.sqrt(F.softplus(z))
        bias = self.w["gate.bias"]
        if image_rows is not None and "gate.bias_vl" in self.w:
            bias = torch.where(image_rows[:, None], self.w["gate.bias_vl"], bias)
        ids = ops.torch_topk(s + bias, self.k, sorted=True)
        weights = torch.gather(s, -1, ids)
        if self.cfg.norm_topk_prob and self.k > 1:
            # torch's own FP32 sum on the CPU: its order is not index order for every k (torch
            # 1.13 adds 6 weights as ((((w0 + w4) + w5) + w1) + w2) + w3), and the official
            # code normalises with it
            total = weights.cpu().sum(-1, keepdim=True).to(weights.device)
            weights = weights / (total + 1e-20)
        return ids, weights * self.cfg.routed_scaling_factor

    def expert(self, xq, prefix, weight=None):
        """SwiGLU expert on act-quantised input xq [n, dim] -> bf16 [n, dim]."""
        R = self.R
        g = ops.quantised_linear(R, xq, self.w[prefix + "w1.weight"])
        u = ops.quantised_linear(R, xq, self.w[prefix + "w3.weight"])
        if self.limit > 0:
            u = u.clamp(-self.limit, self.limit)
            g = g.clamp(max=self.limit)
        a = F.silu(g) * u
        if weight is not None:
            a = a * weight[:, None]
        return ops.fp8_linear(R, R.bf16(a), self.w[prefix + "w2.weight"])

    def forward(self, x, image_rows=None):
        """x [R, dim] (bf16) -> (y [R, dim] bf16, expert ids [R, k], weights [R, k])."""
        ids, weights = self.route(x, image_rows)
        xq = self.R.act_quant(x)
        y = torch.zeros_like(x)
        for e in range(self.cfg.n_routed_experts):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out = self.expert(xq[rows], f"experts.{e}.", weights[rows, slot])
            y = y.index_add(0, rows, out)
        if self.cfg.n_shared_experts > 0:
            y = y + self.expert(xq, "shared_experts.")
        return self.R.bf16(y), ids, weights
