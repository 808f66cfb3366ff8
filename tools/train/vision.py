"""DeepSeek-ViT and the aligner (docs/model-spec.md §8): linear patch embed with bias, pre-RMSNorm
blocks (fused qkv with bias, 2D rotate-half RoPE, bidirectional attention, SwiGLU MLP), final
norm; 3x3 pixel-unshuffle with zero padding, w1 (bias) -> exact GELU -> w2 (bias). All weights
are BF16 in the checkpoint; the tower runs in the activation dtype with FP32 attention math.

Training runs the pictures of a micro-batch through a few calls whatever their grids
(`packed_cells`, with the padded sets of image_pack.py): each picture's attention sees only its
own patches (padded keys masked), so its values are its own grid's up to FP32 summation order.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .common import Norm, Weight
from .rope import apply_rope_half, vision_tables, vision_tables_at

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

    def forward(self, num, x, cos, sin, vc, key_valid=None):
        """x [n, P, d]; cos/sin [n or 1, P, hd/2]; key_valid [n, P] bool (None: every patch)."""
        n, P, d = x.shape
        H, hd = vc.num_attention_heads, vc.head_dim
        h = num.rms_norm(x, self.norm1.weight, vc.norm_eps)
        qkv = num.linear_bf16(h, self.attn.wqkv.weight, self.attn.wqkv.bias)
        q, k, v = qkv.view(n, P, 3, H, hd).unbind(2)
        q = apply_rope_half(q, cos.unsqueeze(-2), sin.unsqueeze(-2))
        k = apply_rope_half(k, cos.unsqueeze(-2), sin.unsqueeze(-2))
        att = torch.einsum("nqhd,nkhd->nhqk", q, k) * hd ** -0.5
        if key_valid is not None:
            att = att.masked_fill(~key_valid[:, None, None, :], float("-inf"))
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
        """patches [n, n_h*n_w, 3*p*p] (normalised pixels) of one grid -> features
        [n, n_h*n_w, d]."""
        cos, sin = vision_tables(self.vc.head_dim, self.vc.rope_theta, n_h, n_w, patches.device)
        return self.encode(num, patches, cos, sin)

    def packed(self, num, patches, rc, key_valid):
        """patches [n, P, 3*p*p] of pictures of several grids padded to P, at (row, col)
        rc [n, P, 2] FP32, real where key_valid [n, P] -> features [n, P, d] (padding rows are
        computed but attend to nothing but their picture's real patches)."""
        cos, sin = vision_tables_at(self.vc.head_dim, self.vc.rope_theta, rc)
        return self.encode(num, patches, cos, sin, key_valid)

    def encode(self, num, patches, cos, sin, key_valid=None):
        x = num.linear_bf16(num.rb(patches), self.patch_embed.proj.weight,
                            self.patch_embed.proj.bias)
        for blk in self.blocks:
            x = blk(num, x, cos, sin, self.vc, key_valid)
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


def packed_cells(num, tower, aligner, pack):
    """Aligner rows [cells, dim] of every picture of an ImagePack, in pack.cell_irc's order:
    one tower call over the padded set, the real patches placed in a zero grid of
    grid_h x grid_w per picture, one aligner call over the grids."""
    n, P, _ = pack.pixels.shape
    feats = tower.packed(num, pack.pixels, pack.patch_rc, pack.key_valid)       # [n, P, d]
    d = feats.shape[-1]
    grid = feats.new_zeros(n * pack.grid_h * pack.grid_w, d).index_copy(
        0, pack.patch_dst, feats.reshape(n * P, d).index_select(0, pack.patch_src))
    cells = aligner(num, grid.view(n, pack.grid_h * pack.grid_w, d), pack.grid_h, pack.grid_w)
    H3, W3 = -(-pack.grid_h // aligner.r), -(-pack.grid_w // aligner.r)
    m, i, j = pack.cell_irc.unbind(1)
    return cells.reshape(n * H3 * W3, -1).index_select(0, (m * H3 + i) * W3 + j)


def image_span_rows(num, rows, n_llm_h, n_llm_w, start, newline, end):
    """rows [n, n_llm_h*n_llm_w, dim] -> embeddings of whole spans [n, n_llm_h*(n_llm_w+1)+2,
    dim]: IMAGE_START, each row of cells followed by IMAGE_NEW_LINE, IMAGE_END (one grid; the
    goldens' spans; training writes the same layout through image_pack.py's positions)."""
    n, _, dim = rows.shape
    grid = rows.view(n, n_llm_h, n_llm_w, dim)
    nl = num.w_bf16(newline).to(rows.dtype).view(1, 1, 1, dim).expand(n, n_llm_h, 1, dim)
    body = torch.cat((grid, nl), dim=2).reshape(n, n_llm_h * (n_llm_w + 1), dim)
    s = num.w_bf16(start).to(rows.dtype).view(1, 1, dim).expand(n, 1, dim)
    e = num.w_bf16(end).to(rows.dtype).view(1, 1, dim).expand(n, 1, dim)
    return torch.cat((s, body, e), dim=1)
