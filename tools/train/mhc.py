"""Single-pass manifold-constrained hyper-connections (docs/model-spec.md §4.1, §4.3): the mix
coefficients of a sublayer from its input streams (FP32, Sinkhorn), collapse and expand.

Shapes: streams X [B, N, hc, D] (activation dtype); pre/post [B, N, hc], comb [B, N, hc, hc]
(row j = source stream, column k = destination stream), all FP32.

collapse and expand have two implementations with the same values up to FP32 summation order:
"loop" (one elementwise pass per stream; fast on CPUs, the default) and "matmul" (one batched
matrix product per call; on the GPU it replaces about a dozen broadcasting passes over the
[B, N, hc, D] FP32 streams, to be measured with bench.py).
"""
import torch

F32 = torch.float32


def hc_mixes(X, fn, base, scale, iters, hc_eps, norm_eps):
    """(pre, post, comb) from streams X with parameters fn [(2+hc)hc, hc*D], base, scale [3]."""
    hc = X.shape[-2]
    xf = X.flatten(-2).to(F32)
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + norm_eps)
    m = torch.matmul(xf, fn.t()) * r
    pre = torch.sigmoid(m[..., :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2 * torch.sigmoid(m[..., hc:2 * hc] * scale[1] + base[hc:2 * hc])
    c = (m[..., 2 * hc:] * scale[2] + base[2 * hc:]).view(*m.shape[:-1], hc, hc)
    return pre, post, sinkhorn(c, iters, hc_eps)


def sinkhorn(c, iters, eps):
    """Row softmax + eps, column normalise, then iters-1 rounds of row then column
    normalisation, each dividing by (sum + eps)."""
    c = torch.softmax(c, dim=-1) + eps
    c = c / (c.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(-1, keepdim=True) + eps)
        c = c / (c.sum(-2, keepdim=True) + eps)
    return c


IMPLS = ("loop", "matmul")


def collapse(num, X, pre, impl="loop"):
    """bf16(sum_j pre_j X_j) summed over j in order: the sublayer input [B, N, D]."""
    if impl == "matmul":
        return num.rb(torch.matmul(pre.unsqueeze(-2), X.to(F32)).squeeze(-2))
    acc = pre[..., 0:1] * X[..., 0, :].to(F32)
    for j in range(1, X.shape[-2]):
        acc = acc + pre[..., j:j + 1] * X[..., j, :].to(F32)
    return num.rb(acc)


def expand(num, X, y, post, comb, impl="loop"):
    """X'_k = bf16(post_k * y + sum_j comb_jk X_j) (j in order): the new streams [B, N, hc, D].
    "loop": elementwise over j rather than a per-token [hc x hc] matmul (slow batched GEMMs on
    CPUs); "matmul": post_k * y plus comb^T X as one batched product."""
    acc = post.unsqueeze(-1) * y.to(F32).unsqueeze(-2)
    if impl == "matmul":
        hc, D = X.shape[-2], X.shape[-1]
        mixed = torch.baddbmm(acc.reshape(-1, hc, D), comb.reshape(-1, hc, hc).transpose(1, 2),
                              X.to(F32).reshape(-1, hc, D))
        return num.rb(mixed.view(acc.shape))
    for j in range(X.shape[-2]):
        acc = acc + comb[..., j, :].unsqueeze(-1) * X[..., j:j + 1, :].to(F32)
    return num.rb(acc)
