"""The attention core of every layer: one softmax with the sink over the window keys and the
selected compressed entries (docs/numerics.md §Attention), batched without per-token loops.

Window: queries in blocks of W attend the 2W keys of their block and the previous one, masked to
[lo(t), t]. Compressed: the top-k entries gathered per query (sparse) or every visible entry with
a mask (dense warm-up). Logits q.k * D^-1/2, probabilities and the weighted sum in FP32.
"""
import torch
import torch.nn.functional as F

F32 = torch.float32
NEG_INF = float("-inf")


def _window_part(q, kv, lo, W, scale):
    """logits [B, N, H, 2W] (masked) and keys [B, nb, D, 2W] of the blocked window."""
    B, N, H, D = q.shape
    nb = N // W
    k2 = F.pad(kv, (0, 0, W, 0)).unfold(1, 2 * W, W)             # [B, nb, D, 2W]
    lw = torch.einsum("bnqhd,bndk->bnqhk", q.view(B, nb, W, H, D), k2) * scale
    blk = torch.arange(nb, device=q.device).unsqueeze(1) * W
    kpos = blk - W + torch.arange(2 * W, device=q.device)          # [nb, 2W]
    tpos = blk + torch.arange(W, device=q.device)                  # [nb, W]
    ok = (kpos.unsqueeze(1) <= tpos.unsqueeze(2)).unsqueeze(0)     # [1, nb, W, 2W]
    ok = ok & (kpos.view(1, nb, 1, 2 * W) >= lo.view(B, nb, W, 1))
    lw = lw.masked_fill(~ok.unsqueeze(3), NEG_INF)
    return lw.reshape(B, N, H, 2 * W), k2


def _compressed_part(q, kvc, idx, valid, n_vis, scale):
    """logits [B, N, H, k|E] (masked) and the values they weight: gathered [B, N, k, D] rows or
    the whole [B, E, D] cache (dense)."""
    B, N, H, D = q.shape
    if idx is not None:
        E = kvc.shape[1]
        flat = idx + (torch.arange(B, device=q.device) * E).view(B, 1, 1)
        g = F.embedding(flat, kvc.reshape(B * E, D))               # [B, N, k, D]
        lc = torch.einsum("bnhd,bnkd->bnhk", q, g) * scale
        return lc.masked_fill(~valid.unsqueeze(2), NEG_INF), g
    E = kvc.shape[1]
    lc = torch.einsum("bnhd,bed->bnhe", q, kvc) * scale
    vis = torch.arange(E, device=q.device).unsqueeze(0) < n_vis.unsqueeze(1)  # [N, E]
    return lc.masked_fill(~vis.view(1, N, 1, E), NEG_INF), kvc


def attention_core(q, kv, lo, sink, W, kvc=None, idx=None, valid=None, n_vis=None):
    """q [B, N, H, D], kv [B, N, D] window KV, lo [B, N]; optional compressed kvc [B, E, D] with
    idx/valid [B, N, k] (sparse) or n_vis [N] (dense). Returns (o [B, N, H, D] FP32, probs of
    the compressed entries summed over heads [B, N, k|E] detached, or None)."""
    q, kv = q.to(F32), kv.to(F32)
    B, N, H, D = q.shape
    scale = D ** -0.5
    lw, k2 = _window_part(q, kv, lo, W, scale)
    mx = torch.maximum(lw.amax(-1), sink.view(1, 1, H).to(F32))
    lc = None
    if kvc is not None:
        lc, vals = _compressed_part(q, kvc.to(F32), idx, valid, n_vis, scale)
        mx = torch.maximum(mx, lc.amax(-1))
    mx = mx.detach()
    pw = torch.exp(lw - mx.unsqueeze(-1))
    den = pw.sum(-1) + torch.exp(sink.view(1, 1, H).to(F32) - mx)
    nb = N // W
    o = torch.einsum("bnqhk,bndk->bnqhd", pw.view(B, nb, W, H, 2 * W), k2).reshape(B, N, H, D)
    probs = None
    if lc is not None:
        pc = torch.exp(lc - mx.unsqueeze(-1))
        den = den + pc.sum(-1)
        if idx is not None:
            o = o + torch.einsum("bnhk,bnkd->bnhd", pc, vals)
        else:
            o = o + torch.einsum("bnhe,bed->bnhd", pc, vals)
        probs = (pc / den.unsqueeze(-1)).sum(2).detach()
    return o / den.unsqueeze(-1), probs
