"""The forward's building blocks with the roundings of docs/numerics.md.

BF16 tensors of the reference are float32 tensors holding bf16-rounded values; `Rounding`
supplies the rounding functions (plain for inference, straight-through for training). Ops
accept leading batch dims (`...`) so a trainer can stack sequences; the oracle passes one.
"""
import math

import torch
import torch.nn.functional as F

from . import quant

F32 = torch.float32


class Rounding:
    """The rounding points and reductions of the forward.

    ste=True: same values, identity gradients (QAT). exact_sums=True: every matmul and
    reduction ("FP32 accumulation") is computed in FP64 and rounded once to FP32, i.e. the
    correctly rounded sum, which any FP32 summation order approximates; where the official code
    fixes a structure of FP32 sums (the FP8/FP4 GEMM's per-block partials, the attention's
    64-slot blocks), each of its parts is such a sum and the parts are combined in FP32 as it
    combines them. Results then do not depend on BLAS blocking or on how many rows a step has.
    exact_sums=False: FP32 in torch's order (--fp32-sums: the noise floor of summation order)."""

    def __init__(self, ste=False, exact_sums=True):
        self.ste = ste
        self.exact_sums = exact_sums
        self.bf16 = quant.bf16_ste if ste else quant.bf16
        self.act_quant = quant.act_quant_ste if ste else quant.act_quant
        self.fp4_e8m0 = quant.fp4_e8m0_ste if ste else quant.fp4_e8m0
        self.fp4_e4m3 = quant.fp4_e4m3_ste if ste else quant.fp4_e4m3

    def _wide(self, x):
        return x.double() if self.exact_sums else x

    def mm(self, a, b):
        """a @ b with FP32 (exactly rounded) accumulation."""
        return (self._wide(a) @ self._wide(b)).to(F32)

    def block_mm(self, x, w, block=32):
        """x [.., K] times w [O, K] transposed, summed as the official FP8/FP4 GEMM sums
        (kernel_cpu._block_scaled_gemm): one FP32 partial per K-block of `block` (correctly
        rounded, or torch's FP32 order without exact_sums), the partials added to an FP32
        accumulator in K order. x and w hold dequantised values: their scales are powers of two,
        so each partial equals the official unscaled partial times both scales exactly."""
        K = x.shape[-1]
        n_blocks = -(-K // block)
        pad = n_blocks * block - K
        if pad:   # zeros add nothing to the last block's partial
            x, w = F.pad(x, (0, pad)), F.pad(w, (0, pad))
        xb, wb = x.unflatten(-1, (n_blocks, block)), w.unflatten(-1, (n_blocks, block))
        parts = torch.einsum("...bk,obk->...ob", self._wide(xb), self._wide(wb)).to(F32)
        acc = parts[..., 0]
        for b in range(1, n_blocks):
            acc = acc + parts[..., b]
        return acc

    def einsum(self, eq, *xs):
        return torch.einsum(eq, *[self._wide(x) for x in xs]).to(F32)

    def sum(self, x, dim, keepdim=False):
        return self._wide(x).sum(dim, keepdim=keepdim).to(F32)

    def mean(self, x, dim, keepdim=False):
        return self._wide(x).mean(dim, keepdim=keepdim).to(F32)

    def softmax(self, x, dim):
        return torch.softmax(self._wide(x), dim=dim).to(F32)


# ---- norms and linears ------------------------------------------------------------------------
def rms_norm(R, x, w, eps):
    """bf16(w * (x * rsqrt(mean(x^2) + eps))) in FP32."""
    return R.bf16(w * (x * torch.rsqrt(R.mean(x.square(), -1, keepdim=True) + eps)))


def fp8_linear(R, x, w):
    """FP8/FP4-weight linear: act_quant(x) per 32 along K, then quantised_linear.
    `w` holds the dequantised weight values [out, in]."""
    return quantised_linear(R, R.act_quant(x), w)


def quantised_linear(R, xq, w):
    """FP8/FP4-weight linear of an act_quant'ed input: FP32 partial per K-block of 32, the
    partials added in K order (the official fp8_gemm / fp4_gemm), bf16 output."""
    return R.bf16(R.block_mm(xq, w))


def bf16_linear(R, x, w):
    """BF16 F.linear: bf16 inputs x bf16 weights, FP32 accumulation, bf16 output."""
    return R.bf16(R.mm(x, w.t()))


def f32_linear(R, x, w):
    """FP32 linear (weights promoted from BF16), no rounding."""
    return R.mm(x, w.t())


# ---- RoPE -------------------------------------------------------------------------------------
def rope_freqs(rope_dim, base, yarn=None):
    """float32 [rope_dim/2] frequencies f_i = 1/base^(2i/rope_dim), with the YaRN correction of
    docs/model-spec.md §3.1 when `yarn` = (factor, original_len, beta_fast, beta_slow)."""
    freqs = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=F32) / rope_dim))
    if yarn is None:
        return freqs
    factor, original, beta_fast, beta_slow = yarn

    def corr_dim(rotations):
        return rope_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), rope_dim - 1)
    denom = max(high - low, 1e-3)
    ramp = ((torch.arange(rope_dim // 2, dtype=F32) - low) / denom).clamp(0.0, 1.0)
    return freqs / factor * ramp + freqs * (1.0 - ramp)


def rope_cos_sin(freqs, positions):
    """cos, sin float32 [..., T, rope_dim/2] of the FP32 angles position * f_i."""
    angles = positions.to(F32)[..., None] * freqs
    return torch.cos(angles), torch.sin(angles)


def rope_tail(R, x, cos, sin, inverse=False):
    """Rotates the last 2*len(freqs) dims of x as adjacent pairs (2i, 2i+1); result bf16.
    cos/sin [..., T, r/2] broadcast over any head dim between T and the vector dim."""
    r = cos.shape[-1] * 2
    if x.dim() == cos.dim() + 1:  # x has a head dim: [.., T, H, D]
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    head, tail = x[..., :-r], x[..., -r:]
    a, b = tail[..., 0::2], tail[..., 1::2]
    if inverse:
        ra, rb = a * cos + b * sin, b * cos - a * sin
    else:
        ra, rb = a * cos - b * sin, a * sin + b * cos
    rotated = torch.stack((ra, rb), dim=-1).flatten(-2)
    return torch.cat((head, R.bf16(rotated)), dim=-1)


# ---- mHC --------------------------------------------------------------------------------------
def hc_mixes(R, X, fn, base, scale, norm_eps, hc_eps, iters):
    """pre [.., hc], post [.., hc], comb [.., hc, hc] (row j = source stream, column k =
    destination) from the stream X [.., hc, D], all FP32, Sinkhorn as docs/model-spec.md §4.1."""
    hc = X.shape[-2]
    flat = X.flatten(-2)
    m = R.mm(flat, fn.t()) * torch.rsqrt(R.mean(flat.square(), -1, keepdim=True) + norm_eps)
    pre = torch.sigmoid(m[..., :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2.0 * torch.sigmoid(m[..., hc:2 * hc] * scale[1] + base[hc:2 * hc])
    comb = (m[..., 2 * hc:] * scale[2] + base[2 * hc:]).unflatten(-1, (hc, hc))
    comb = R.softmax(comb, dim=-1) + hc_eps
    comb = comb / (_ordered_sum(comb, -2) + hc_eps)
    for _ in range(iters - 1):
        comb = comb / (_ordered_sum(comb, -1) + hc_eps)
        comb = comb / (_ordered_sum(comb, -2) + hc_eps)
    return pre, post, comb


def _ordered_sum(x, dim):
    """FP32 sum over a short dim (hc streams) in index order: ((x0 + x1) + x2) + ..., kept dim.
    docs/model-spec.md §14: keep the Sinkhorn iteration in FP32 in the same order."""
    parts = x.unbind(dim)
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc.unsqueeze(dim)


def hc_collapse(R, X, pre):
    """bf16(sum_j pre[j] * X_j), summed over j = 0..hc-1 in order. X [.., hc, D], pre [.., hc]."""
    acc = pre[..., 0, None] * X[..., 0, :]
    for j in range(1, X.shape[-2]):
        acc = acc + pre[..., j, None] * X[..., j, :]
    return R.bf16(acc)


def hc_expand(R, X, y, post, comb):
    """X'_k = bf16(post_k * y + sum_j comb[j][k] * X_j) for every destination stream k."""
    acc = comb[..., 0, :, None] * X[..., 0:1, :]
    for j in range(1, X.shape[-2]):
        acc = acc + comb[..., j, :, None] * X[..., j:j + 1, :]
    return R.bf16(post[..., None] * y[..., None, :] + acc)


# ---- attention --------------------------------------------------------------------------------
ATTENTION_BLOCK = 64   # key-list slots per step of the official kernel's online softmax


def sparse_attention(R, q, keys, valid, sink, scale):
    """The official sparse-attention kernel (kernel_cpu.sparse_attn; docs/numerics.md "Sparse
    attention") over each query's key list (keys are also the values).

    q [.., T, H, D]; keys [.., T, N, D] the list of each query (window slots, then the top-k
    columns); valid [.., T, N] bool (False: an empty slot); sink [H]. Returns FP32 [.., T, H, D].
    The list is walked in blocks of 64 slots with a running maximum of the scores only (from
    -1e30, the sink not in it): s = (q.k) * scale, m' = max(m, max s), c = exp(m - m'),
    p = exp(s - m'), den = den c + sum p (FP32 p), acc = acc c + sum bf16(p) v; at the end
    den += exp(sink - m), o = acc / den. A query without a valid key gets 0 (0 / inf)."""
    keys = keys.masked_fill(~valid[..., None], 0.0)
    acc = torch.zeros_like(q)
    den = torch.zeros(q.shape[:-1], dtype=F32, device=q.device)
    running_max = torch.full(q.shape[:-1], -1e30, dtype=F32, device=q.device)
    for b0 in range(0, keys.shape[-2], ATTENTION_BLOCK):
        kb, vb = keys[..., b0:b0 + ATTENTION_BLOCK, :], valid[..., b0:b0 + ATTENTION_BLOCK]
        s = R.einsum("...thd,...tnd->...thn", q, kb) * scale
        s = s.masked_fill(~vb[..., None, :], float("-inf"))
        new_max = torch.maximum(running_max, s.amax(-1))                  # [.., T, H]
        rescale = torch.exp(running_max - new_max)
        p = torch.exp(s - new_max[..., None])
        den = den * rescale + R.sum(p, -1)
        acc = acc * rescale[..., None] + R.einsum("...thn,...tnd->...thd", R.bf16(p), kb)
        running_max = new_max
    den = den + torch.exp(sink - running_max)
    return acc / den[..., None]


def torch_topk(scores, k, sorted=True):
    """Indices of the k largest scores along the last dim as torch.topk picks them on the CPU
    (docs/numerics.md "Top-k": which of exactly tied scores is kept depends on torch's
    partial_sort / nth_element over the whole row, so the row's width matters). Computed on
    the CPU whatever the device (a GPU topk breaks ties otherwise), returned on scores' device."""
    return torch.topk(scores.detach().cpu(), k, dim=-1, sorted=sorted).indices.to(scores.device)
