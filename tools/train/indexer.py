"""CSA2 indexer (docs/model-spec.md §3.6, docs/numerics.md): scores of compressed entries, the
candidate blocks of the decoder's first layer, top-k selection, and the distillation loss that
trains the indexer towards the main attention's distribution (as DeepSeek's sparse attention).

Selection runs without gradients; the distillation loss recomputes the scores of the selected
(or, in the dense warm-up, all visible) entries with gradients to the indexer's own weights.
"""
import math

import torch
import torch.nn.functional as F

F32 = torch.float32
NEG_INF = float("-inf")


def _bf16(x):
    """bf16(x) as FP32; the casts' gradient is the identity (straight-through)."""
    return x.to(torch.bfloat16).to(F32)


def score_terms(dots, w):
    """The official BF16 score arithmetic (docs/numerics.md "Indexer") from FP32 head dot
    products dots [..., nh, E] and bf16-valued head weights w [..., nh]:
    bf16(sum_h bf16(relu(bf16(dot)) * w)) -> [..., E]."""
    return _bf16(_bf16(_bf16(dots).relu() * w.unsqueeze(-1)).sum(-2))


@torch.no_grad()
def index_scores(qi, ik, w, n_vis, max_elems=1 << 27):
    """I(t, s) = bf16(sum_h bf16(relu(bf16(qi[t,h] . ik[s])) * w[t,h])) [B, N, E] (FP32
    holding bf16 values); entries s >= n_vis[t] are -inf. qi [B, N, nh, d], ik [B, E, d], w
    [B, N, nh] (bf16 values); chunked over N to bound memory."""
    B, N, nh, _ = qi.shape
    E = ik.shape[1]
    out = torch.empty(B, N, E, dtype=F32, device=qi.device)
    step = max(1, max_elems // max(1, B * nh * E))
    ikf = ik.to(F32)
    for s in range(0, N, step):
        dots = torch.einsum("bnhd,bed->bnhe", qi[:, s:s + step].to(F32), ikf)
        out[:, s:s + step] = score_terms(dots, w[:, s:s + step].to(F32))
    vis = torch.arange(E, device=qi.device).unsqueeze(0) < n_vis.unsqueeze(1)
    return out.masked_fill_(~vis.unsqueeze(0), NEG_INF)


def _topk(x, k, cpu):
    """torch.topk indices, on the CPU when `cpu` (the official code's and the engine's choice
    among tied scores), else on x's device."""
    if cpu:
        return torch.topk(x.cpu(), k, dim=-1).indices.to(x.device)
    return x.topk(k, dim=-1).indices


@torch.no_grad()
def candidate_mask(scores, n_vis, block, keep_blocks, cpu=False, widths=None):
    """[B, N, E] bool: entries of the top `keep_blocks` blocks of `block` entries by block max
    score, the block of the newest visible entry forced in, blocks scoring -inf dropped.
    `cpu`: torch.topk on the CPU; `widths` [B]: each row's score row is that many entries wide
    (the entries at the end of its real tokens, as in inference), else E."""
    B, N, E = scores.shape
    if widths is not None:
        keep = torch.zeros(B, N, E, dtype=torch.bool, device=scores.device)
        for b in range(B):
            w = int(widths[b])
            if w > 0:
                keep[b:b + 1, :, :w] = candidate_mask(scores[b:b + 1, :, :w], n_vis, block, keep_blocks, cpu)
        return keep
    nblk = math.ceil(E / block)
    padded = F.pad(scores, (0, nblk * block - E), value=NEG_INF)
    bs = padded.view(B, N, nblk, block).amax(-1)
    # (clamped: padding queries past a narrower row see more entries than it holds)
    newest = torch.div(n_vis - 1, block, rounding_mode="floor").clamp(0, nblk - 1)
    force = F.one_hot(newest, nblk).bool() & (n_vis >= 1).unsqueeze(1)
    bs = bs.masked_fill(force.unsqueeze(0), float("inf"))
    kk = min(keep_blocks, nblk)
    order = _topk(bs, kk, cpu)
    keep = torch.zeros(B, N, nblk, dtype=torch.bool, device=scores.device)
    keep.scatter_(-1, order, torch.gather(bs, -1, order) > NEG_INF)
    return keep.repeat_interleave(block, dim=-1)[..., :E]


@torch.no_grad()
def select_topk(scores, k, n_vis, cpu=False, widths=None):
    """(idx [B, N, k], valid) of the k best entries (k = min(index_topk, E)), ids ascending per
    query as the indexer publishes them (the attention's list order); ids past a query's
    visible entries are invalid (published as -1). `cpu`: torch.topk on the CPU; `widths` [B]:
    row b selects among its first widths[b] entries, min(k, widths[b]) of them (the rest of its
    columns invalid), as inference over the entries at the end of its real tokens."""
    if widths is not None:
        B, N, _ = scores.shape
        idx = torch.zeros(B, N, k, dtype=torch.long, device=scores.device)
        ok = torch.zeros(B, N, k, dtype=torch.bool, device=scores.device)
        for b in range(B):
            kb = min(k, int(widths[b]))
            if kb > 0:
                i, v = select_topk(scores[b:b + 1, :, :int(widths[b])], kb, n_vis, cpu)
                idx[b, :, :kb], ok[b, :, :kb] = i[0], v[0]
        return idx, ok
    idx = _topk(scores, k, cpu).sort(dim=-1).values
    return idx, idx < n_vis.view(1, -1, 1)


def selected_logits(state):
    """Indexer scores with gradients over the state's selection: [B, N, k] (sparse, invalid
    -inf) or [B, N, E] (dense, invisible -inf)."""
    qi, ik, w, sel = state.qi.to(F32), state.ik.to(F32), state.w, state.sel
    if sel.idx is not None:
        B, E, d = ik.shape
        flat = sel.idx + (torch.arange(B, device=ik.device) * E).view(B, 1, 1)
        keys = F.embedding(flat, ik.reshape(B * E, d))              # [B, N, k, d]
        dots = torch.einsum("bnhd,bnkd->bnhk", qi, keys)
        logits = score_terms(dots, w.to(F32))
        return logits.masked_fill(~sel.valid, NEG_INF), sel.valid
    dots = torch.einsum("bnhd,bed->bnhe", qi, ik)
    logits = score_terms(dots, w.to(F32))
    N, E = logits.shape[1], logits.shape[2]
    n_vis = torch.div(torch.arange(1, N + 1, device=ik.device), state.ratio,
                      rounding_mode="floor")
    vis = (torch.arange(E, device=ik.device).unsqueeze(0) < n_vis.unsqueeze(1)).unsqueeze(0)
    vis = vis.expand_as(logits)
    return logits.masked_fill(~vis, NEG_INF), vis


def distill_loss(state, real):
    """Mean over real queries with a non-empty target of KL(target || softmax(indexer scores)),
    the target being the attention mass on the same entries, normalised. real [B, N] bool."""
    if state.target is None:
        return None
    logits, ok = selected_logits(state)
    tgt = state.target.masked_fill(~ok, 0.0)
    mass = tgt.sum(-1, keepdim=True)
    use = real & (mass.squeeze(-1) > 0)
    p = tgt / mass.clamp_min(1e-30)
    logq = torch.log_softmax(logits.masked_fill(~ok, -1e30), dim=-1)
    kl = (p * (torch.log(p.clamp_min(1e-30)) - logq)).masked_fill(~ok | (p <= 0), 0.0).sum(-1)
    n = use.sum()
    return (kl * use).sum() / n.clamp_min(1), n
