"""The attention core of every layer: the official sparse-attention kernel's numerics over the
window keys and the selected compressed entries (docs/numerics.md "Sparse attention"), batched
without per-token loops.

Window: queries in blocks of W attend the 2W keys of their block and the previous one, masked to
[lo(t), t]. Compressed: the top-k entries gathered per query (sparse; columns in ascending entry
order, as the indexer publishes them) or every visible entry with a mask (dense warm-up, whose
entries form one block after the window's: the official kernel has no dense list).

Each query's key list is the official one: W window slots (slot i holds position
max(0, t - W + 1) + i) followed by the top-k columns, walked in blocks of 64 slots with a running
maximum of the scores alone (the sink is not in it). A key's probability is rounded to bf16
relative to the running maximum of its block before it weighs the value, so key i weighs
bf16(exp(s_i - m_b(i))) * exp(m_b(i) - M) (M the final maximum); the denominator sums the FP32
probabilities exp(s_i - M) plus exp(sink - M). That is the kernel's online softmax with its
rescalings multiplied out (equal up to FP32 rounding). The bf16 casts pass gradients straight
through. Logits q.k * D^-1/2, probabilities and the weighted sums in FP32.
"""
import torch
import torch.nn.functional as F

F32 = torch.float32
NEG_INF = float("-inf")
BLOCK = 64   # key-list slots per step of the official kernel's online softmax


def _bf16(x):
    """bf16(x) as FP32; the casts' gradient is the identity (straight-through)."""
    return x.to(torch.bfloat16).to(F32)


def _window_part(q, kv, lo, W, scale):
    """logits [B, N, H, 2W] (masked), keys [B, nb, D, 2W] of the blocked window, and the list
    block [nb, W, 2W] of each (query, key) pair (slot = key position - max(0, t - W + 1))."""
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
    first = (tpos - W + 1).clamp_min(0)                            # [nb, W]
    slot = (kpos.unsqueeze(1) - first.unsqueeze(2)).clamp(0, W - 1)   # masked keys: any slot
    slot_block = torch.div(slot, BLOCK, rounding_mode="floor")     # [nb, W, 2W]
    return lw.reshape(B, N, H, 2 * W), k2, slot_block.reshape(N, 2 * W)


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


def _block_max(logits, blocks, b):
    """[B, N, H] max of the logits whose list block is b (-inf when none); blocks broadcast
    against logits' last dims."""
    return logits.masked_fill(blocks != b, NEG_INF).amax(-1)


def _running_max(lw, w_blocks, lc, c_blocks, n_blocks):
    """[B, N, H, n_blocks] running maximum after each block of the list (from -1e30)."""
    m = torch.full(lw.shape[:-1], -1e30, dtype=F32, device=lw.device)
    out = []
    for b in range(n_blocks):
        m = torch.maximum(m, _block_max(lw, w_blocks, b))
        if lc is not None and lc.shape[-1]:
            m = torch.maximum(m, _block_max(lc, c_blocks, b))
        out.append(m)
    return torch.stack(out, -1)


def _key_weights(logits, key_max, final):
    """bf16(exp(s - m_block)) * exp(m_block - M): a key's weight on its value."""
    return _bf16(torch.exp(logits - key_max)) * torch.exp(key_max - final)


def attention_core(q, kv, lo, sink, W, kvc=None, idx=None, valid=None, n_vis=None):
    """q [B, N, H, D], kv [B, N, D] window KV, lo [B, N]; optional compressed kvc [B, E, D] with
    idx/valid [B, N, k] (sparse; idx ascending per query) or n_vis [N] (dense). Returns
    (o [B, N, H, D] FP32, probs of the compressed entries summed over heads [B, N, k|E]
    detached, or None)."""
    q, kv = q.to(F32), kv.to(F32)
    B, N, H, D = q.shape
    scale = D ** -0.5
    lw, k2, w_blocks = _window_part(q, kv, lo, W, scale)
    w_blocks = w_blocks.view(1, N, 1, 2 * W)
    lc = vals = c_blocks = None
    n_blocks = -(-W // BLOCK)
    if kvc is not None:
        lc, vals = _compressed_part(q, kvc.to(F32), idx, valid, n_vis, scale)
        cols = lc.shape[-1]
        if idx is not None:   # column c is list slot W + c
            c_blocks = torch.div(W + torch.arange(cols, device=q.device), BLOCK, rounding_mode="floor")
            n_blocks = -(-(W + cols) // BLOCK)
        else:                 # dense warm-up (no official list): every entry in one block after the window
            c_blocks = torch.full((cols,), n_blocks, dtype=torch.long, device=q.device)
            n_blocks += 1
    with torch.no_grad():   # a shift of the softmax: its gradient cancels
        run = _running_max(lw, w_blocks, lc, c_blocks, n_blocks)
    final = run[..., -1:]                                          # [B, N, H, 1]
    sink = sink.view(1, 1, H).to(F32)
    w_max = torch.gather(run, -1, w_blocks.expand(B, N, H, 2 * W))
    den = torch.exp(lw - final).sum(-1) + torch.exp(sink - final[..., 0])
    pw = _key_weights(lw, w_max, final)
    nb = N // W
    o = torch.einsum("bnqhk,bndk->bnqhd", pw.view(B, nb, W, H, 2 * W), k2).reshape(B, N, H, D)
    probs = None
    if lc is not None:
        pc_fp32 = torch.exp(lc - final)
        den = den + pc_fp32.sum(-1)
        pc = _key_weights(lc, run[..., c_blocks], final)
        if idx is not None:
            o = o + torch.einsum("bnhk,bnkd->bnhd", pc, vals)
        else:
            o = o + torch.einsum("bnhe,bed->bnhd", pc, vals)
        probs = (pc_fp32 / den.unsqueeze(-1)).sum(2).detach()
    return o / den.unsqueeze(-1), probs
