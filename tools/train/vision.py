"""DeepSeek-ViT and the aligner (docs/model-spec.md §8): linear patch embed with bias, pre-RMSNorm
blocks (fused qkv with bias, 2D rotate-half RoPE, bidirectional attention, SwiGLU MLP), final
norm; 3x3 pixel-unshuffle with zero padding, w1 (bias) -> exact GELU -> w2 (bias). All weights
are BF16 in the checkpoint; the tower runs in the activation dtype with FP32 attention math.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Norm, Weight
from .rope import apply_rope_half, vision_tables

F32 = torch.float32


class VisionBlock(nn.Module):
    def __init__(self, vc):
        super().__init__()
        d = vc.hidden_size
        self.norm1, self.norm2 = Norm(d), Norm(d)
        self.attn = nn.Module()
        self.attn.wqkv = Weight(3 * d, d, bias=True)
        self.attn.wo = Weight(d, d, bias=True, std=d ** -0.5 / 2)
        self.mlp = nn.Module()
        self.mlp.w1 = Weight(2 * vc.intermediate_size, d)   # gate || up
        self.mlp.w2 = Weight(d, vc.intermediate_size, std=vc.intermediate_size ** -0.5 / 2)

    def forward(self, num, x, cos, sin, vc):
        n, P, d = x.shape
        H, hd = vc.num_attention_heads, vc.head_dim
        h = num.rms_norm(x, self.norm1.weight, vc.norm_eps)
        qkv = num.linear_bf16(h, self.attn.wqkv.weight, self.attn.wqkv.bias)
        q, k, v = qkv.view(n, P, 3, H, hd).unbind(2)
        q = apply_rope_half(q, cos.unsqueeze(1), sin.unsqueeze(1))
        k = apply_rope_half(k, cos.unsqueeze(1), sin.unsqueeze(1))
        att = torch.einsum("nqhd,nkhd->nhqk", q, k) * hd ** -0.5
        o = torch.einsum("nhqk,nkhd->nqhd", torch.softmax(att, -1), v.to(F32))
        x = num.rb(x + num.linear_bf16(num.rb(o.reshape(n, P, d)), self.attn.wo.weight,
                                       self.attn.wo.bias))
        h = num.rms_norm(x, self.norm2.weight, vc.norm_eps)
        g, u = num.linear_bf16(h, self.mlp.w1.weight).chunk(2, dim=-1)
        a = num.rb(F.silu(g.to(F32)) * u.to(F32))
        return num.rb(x + num.linear_bf16(a, self.mlp.w2.weight))


class VisionTower(nn.Module):
    def __init__(self, vc):
        super().__init__()
        self.vc = vc
        self.patch_embed = nn.Module()
        self.patch_embed.proj = Weight(vc.hidden_size, 3 * vc.patch_size ** 2, bias=True)
        self.blocks = nn.ModuleList(VisionBlock(vc) for _ in range(vc.num_hidden_layers))
        self.norm = Norm(vc.hidden_size)

    def forward(self, num, patches, n_h, n_w):
        """patches [n, n_h*n_w, 3*p*p] (normalised pixels) -> features [n, n_h*n_w, d]."""
        x = num.linear_bf16(num.rb(patches), self.patch_embed.proj.weight,
                            self.patch_embed.proj.bias)
        cos, sin = vision_tables(self.vc.head_dim, self.vc.rope_theta, n_h, n_w, x.device)
        for blk in self.blocks:
            x = blk(num, x, cos, sin, self.vc)
        return num.rms_norm(x, self.norm.weight, self.vc.norm_eps)


class Aligner(nn.Module):
    def __init__(self, vc, dim):
        super().__init__()
        r = vc.downsample_ratio
        self.r = r
        self.w1 = Weight(dim, vc.hidden_size * r * r, bias=True)
        self.w2 = Weight(dim, dim, bias=True)

    def forward(self, num, feats, n_h, n_w):
        """feats [n, n_h*n_w, d] -> [n, ceil(n_h/r)*ceil(n_w/r), dim] in reading order; each
        cell's input is ordered channel-major (c*r*r + kh*r + kw)."""
        n, _, d = feats.shape
        r = self.r
        x = feats.view(n, n_h, n_w, d)
        x = F.pad(x, (0, 0, 0, (-n_w) % r, 0, (-n_h) % r))
        H3, W3 = x.shape[1] // r, x.shape[2] // r
        x = x.view(n, H3, r, W3, r, d).permute(0, 1, 3, 5, 2, 4).reshape(n, H3 * W3, d * r * r)
        h = num.linear_bf16(x, self.w1.weight, self.w1.bias)
        h = num.rb(F.gelu(h.to(F32)))
        return num.linear_bf16(h, self.w2.weight, self.w2.bias)


def image_span_rows(num, rows, n_llm_h, n_llm_w, start, newline, end):
    """rows [n, n_llm_h*n_llm_w, dim] -> embeddings of whole spans [n, n_llm_h*(n_llm_w+1)+2,
    dim]: IMAGE_START, each row of cells followed by IMAGE_NEW_LINE, IMAGE_END."""
    n, _, dim = rows.shape
    grid = rows.view(n, n_llm_h, n_llm_w, dim)
    nl = num.w_bf16(newline).to(rows.dtype).view(1, 1, 1, dim).expand(n, n_llm_h, 1, dim)
    body = torch.cat((grid, nl), dim=2).reshape(n, n_llm_h * (n_llm_w + 1), dim)
    s = num.w_bf16(start).to(rows.dtype).view(1, 1, dim).expand(n, 1, dim)
    e = num.w_bf16(end).to(rows.dtype).view(1, 1, dim).expand(n, 1, dim)
    return torch.cat((s, body, e), dim=1)
