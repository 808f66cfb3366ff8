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


@torch.no_grad()
def index_scores(qi, ik, w, n_vis, max_elems=1 << 27):
    """I(t, s) = sum_h w[t,h] relu(qi[t,h] . ik[s]) in FP32 [B, N, E]; entries s >= n_vis[t]
    are -inf. qi [B, N, nh, d], ik [B, E, d], w [B, N, nh]; chunked over N to bound memory."""
    B, N, nh, _ = qi.shape
    E = ik.shape[1]
    out = torch.empty(B, N, E, dtype=F32, device=qi.device)
    step = max(1, max_elems // max(1, B * nh * E))
    ikf = ik.to(F32)
    for s in range(0, N, step):
        dots = torch.einsum("bnhd,bed->bnhe", qi[:, s:s + step].to(F32), ikf)
        out[:, s:s + step] = (dots.clamp_min_(0) * w[:, s:s + step].unsqueeze(-1)).sum(2)
    vis = torch.arange(E, device=qi.device).unsqueeze(0) < n_vis.unsqueeze(1)
    return out.masked_fill_(~vis.unsqueeze(0), NEG_INF)


@torch.no_grad()
def candidate_mask(scores, n_vis, block, keep_blocks, stable=False):
    """[B, N, E] bool: entries of the top `keep_blocks` blocks of `block` entries by block max
    score, the block of the newest visible entry forced in, blocks scoring -inf dropped.
    `stable`: equal block scores go to the lower block index."""
    B, N, E = scores.shape
    nblk = math.ceil(E / block)
    padded = F.pad(scores, (0, nblk * block - E), value=NEG_INF)
    bs = padded.view(B, N, nblk, block).amax(-1)
    newest = torch.div(n_vis - 1, block, rounding_mode="floor").clamp_min(0)
    force = F.one_hot(newest, nblk).bool() & (n_vis >= 1).unsqueeze(1)
    bs = bs.masked_fill(force.unsqueeze(0), float("inf"))
    kk = min(keep_blocks, nblk)
    if stable:
        vals, order = torch.sort(bs, dim=-1, descending=True, stable=True)
        vals, order = vals[..., :kk], order[..., :kk]
    else:
        vals, order = bs.topk(kk, dim=-1)
    keep = torch.zeros(B, N, nblk, dtype=torch.bool, device=scores.device)
    keep.scatter_(-1, order, vals > NEG_INF)
    return keep.repeat_interleave(block, dim=-1)[..., :E]


@torch.no_grad()
def select_topk(scores, k, n_vis, stable=False):
    """(idx [B, N, k], valid) of the k best entries (k = min(index_topk, E)); ids past a query's
    visible entries are invalid (published as -1). `stable`: ties go to the lower index and ids
    are sorted ascending, as the engine publishes them."""
    if stable:
        idx = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :k]
        idx = idx.sort(dim=-1).values
    else:
        idx = scores.topk(k, dim=-1).indices
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
        logits = (dots.relu() * w.unsqueeze(-1)).sum(2)
        return logits.masked_fill(~sel.valid, NEG_INF), sel.valid
    dots = torch.einsum("bnhd,bed->bnhe", qi, ik)
    logits = (dots.relu() * w.unsqueeze(-1)).sum(2)
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
