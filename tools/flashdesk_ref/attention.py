"""CSA2 attention of one layer in any role (window / Full / Reindex / Reuse), its compressor,
indexer and candidate selection (docs/model-spec.md §3.1, §3.5-3.7; docs/numerics.md).

Shapes: R query rows of this step, H heads, D head_dim, r rope dims, E compressed entries.
"""
import torch
import torch.nn.functional as F

from . import ops
from .config import FULL, REINDEX, WINDOW

F32 = torch.float32
NEG_INF = float("-inf")


class Attention:
    def __init__(self, cfg, role, weights, R):
        self.cfg, self.role, self.R = cfg, role, R
        p = f"layers.{role.layer}.attn."
        self.w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
        self.H, self.D, self.r = cfg.num_attention_heads, cfg.head_dim, cfg.qk_rope_head_dim
        self.W = cfg.sliding_window
        self.m = role.ratio
        rs = cfg.rope_scaling
        yarn = None
        if self.m > 0 and rs.get("rope_type") == "yarn":
            yarn = (float(rs["factor"]), float(rs["original_max_position_embeddings"]),
                    float(rs["beta_fast"]), float(rs["beta_slow"]))
        base = cfg.compress_rope_theta if self.m > 0 else cfg.rope_theta
        self.device = weights["embed.weight"].device
        self.freqs = ops.rope_freqs(self.r, float(base), yarn).to(self.device)
        self.scale = torch.tensor(self.D ** -0.5, dtype=F32, device=self.device)
        # d^-1/2 * h^-1/2 formed in double as Python forms it, used as an FP32 constant (the
        # official BF16 tensor times a Python float)
        self.index_scale = torch.tensor(cfg.index_head_dim ** -0.5 * cfg.index_n_heads ** -0.5,
                                        dtype=F32, device=self.device)

    def norm(self, x, name):
        return ops.rms_norm(self.R, x, self.w[name + ".weight"], self.cfg.rms_norm_eps)

    # ---- the sublayer -------------------------------------------------------------------------
    def forward(self, x, positions, state, step, trace, compress_done=False):
        """x [R, dim] (bf16 values) at `positions` [R] -> attention output [R, dim] (bf16)."""
        R, l = self.R, self.role.layer
        cos, sin = ops.rope_cos_sin(self.freqs, positions)
        qr = self.norm(ops.fp8_linear(R, x, self.w["wq_a.weight"]), "q_norm")
        q = ops.fp8_linear(R, qr, self.w["wq_b.weight"]).unflatten(-1, (self.H, self.D))
        q = ops.rope_tail(R, q, cos, sin)
        kv = self.norm(ops.fp8_linear(R, x, self.w["wkv.weight"]), "kv_norm")
        kv = R.act_quant(ops.rope_tail(R, kv, cos, sin), 32)          # [R, D] FP8 values

        if self.role.role == FULL and not compress_done:
            self.compress(x, positions, state.sources[l])
        if self.role.role in (FULL, REINDEX):
            self.index(qr, x, positions, state, step, trace)

        # each query's key list (docs/numerics.md "Sparse attention"): W window slots, then the
        # top-k columns of its index source
        cache = state.layers[l]
        slots, valid = window_slots(positions, self.W, cache.pos, step.window_start)
        keys = torch.cat((cache.kv, kv))[slots]                          # [R, W, D]
        if self.role.role != WINDOW:
            source = state.sources[self.role.kv_source]
            row0, ids = step.topk[self.role.index_source]
            ids = ids[positions[0] - step.pos0 - row0:]
            keys = torch.cat((keys, source.comp_kv[ids.clamp_min(0)]), dim=1)
            valid = torch.cat((valid, ids >= 0), dim=-1)

        o = R.bf16(ops.sparse_attention(R, q, keys, valid, self.w["attn_sink"], self.scale))
        o = ops.rope_tail(R, o, cos, sin, inverse=True)                # [R, H, D]
        cache.write(kv, positions)
        return self.output(o)

    def output(self, o):
        """Grouped wo_a (BF16 einsum per group) then wo_b (FP8 linear)."""
        G = self.cfg.o_groups
        og = o.flatten(-2).unflatten(-1, (G, -1))                      # [R, G, H*D/G]
        wo_a = self.w["wo_a.weight"].unflatten(0, (G, -1))              # [G, o_lora, H*D/G]
        z = self.R.bf16(self.R.einsum("rgi,goi->rgo", og, wo_a)).flatten(-2)
        return ops.fp8_linear(self.R, z, self.w["wo_b.weight"])

    # ---- compressor (KV sources) --------------------------------------------------------------
    def compress(self, x, positions, source):
        """Appends the entries completed by this step to `source` (compressed KV, index keys)."""
        R, m = self.R, self.m
        if m == 1:
            latent = self.norm(ops.bf16_linear(R, x, self.w["compressor.wkv.weight"]), "compressor.norm")
            first = positions
        else:
            kv = torch.cat((source.pending_kv, ops.f32_linear(R, x, self.w["compressor.wkv.weight"])))
            sc = torch.cat((source.pending_score, ops.f32_linear(R, x, self.w["compressor.wgate.weight"])))
            groups = kv.shape[0] // m
            n = groups * m
            source.pending_kv, source.pending_score = kv[n:], sc[n:]
            weights = R.softmax(sc[:n].unflatten(0, (groups, m)), dim=1)       # per channel
            pooled = R.bf16(R.sum(weights * kv[:n].unflatten(0, (groups, m)), 1))
            latent = self.norm(pooled, "compressor.norm")
            first = source.entries * m + m * torch.arange(groups, dtype=torch.long, device=x.device)
        if latent.shape[0] == 0:
            return
        cos, sin = ops.rope_cos_sin(self.freqs, first)
        comp = R.fp4_e4m3(ops.rope_tail(R, latent, cos, sin), 16)
        k = self.norm(ops.bf16_linear(R, latent, self.w["indexer.wk.weight"]), "indexer.k_norm")
        k = R.fp4_e8m0(ops.rope_tail(R, k, cos, sin), 32)
        source.comp_kv = torch.cat((source.comp_kv, comp))
        source.index_k = torch.cat((source.index_k, k))

    # ---- indexer (index sources) --------------------------------------------------------------
    def index(self, qr, x, positions, state, step, trace):
        """Publishes this layer's top-k entry ids (and candidates at the candidate source)."""
        R, cfg, l = self.R, self.cfg, self.role.layer
        source = state.sources[self.role.kv_source]
        E = source.entries
        cos, sin = ops.rope_cos_sin(self.freqs, positions)
        qi = ops.fp8_linear(R, qr, self.w["indexer.wq_b.weight"]).unflatten(
            -1, (cfg.index_n_heads, cfg.index_head_dim))
        qi = R.fp4_e8m0(ops.rope_tail(R, qi, cos, sin), 32)
        # the official BF16 arithmetic: w = bf16(bf16(weights_proj(x)) * c),
        # I(t,s) = bf16(sum_h bf16(relu(bf16(qi[t,h] . k[s])) * w[t,h]))
        w = R.bf16(ops.bf16_linear(R, x, self.w["indexer.weights_proj.weight"]) * self.index_scale)
        dots = R.bf16(R.einsum("thd,sd->ths", qi, source.index_k))
        score = R.bf16(R.sum(R.bf16(torch.relu(dots) * w[..., None]), -2))      # [R, E]
        # the row spans the entries that exist at the end of the prompt (or of this step): ties
        # fall as in the official one-shot prefill and decode step (docs/numerics.md "Top-k")
        width = max(E, step.prompt_end // self.m)
        score = F.pad(score, (0, width - E), value=NEG_INF)
        visible = (positions + 1) // self.m                                 # entries j < visible
        score = score.masked_fill(torch.arange(width, device=score.device)[None, :] >= visible[:, None], NEG_INF)
        row0 = int(positions[0] - step.pos0)
        if self.role.builds_candidates:
            cand = candidate_mask(score.detach(), visible, cfg.candidate_block_size, cfg.candidate_topk_blocks)
            step.candidates[l] = (row0, cand)
            trace.put("candidates", l, cand[:, :E].to(torch.uint8), row0)
        if self.role.candidate_source >= 0:
            c0, cand = step.candidates[self.role.candidate_source]
            score = score.masked_fill(~cand[row0 - c0:], NEG_INF)
        k = min(cfg.index_topk, width)
        ids = ops.torch_topk(score, k, sorted=False).sort(dim=-1).values
        ids = torch.where(ids < visible[:, None], ids, torch.full_like(ids, -1))
        step.topk[l] = (row0, ids)
        published = torch.full((ids.shape[0], cfg.index_topk), -1, dtype=torch.long, device=ids.device)
        published[:, :k] = torch.where(ids >= 0, ids + step.offset, ids)
        trace.put("topk_idxs", l, published, row0)


def window_slots(positions, window, ring_positions, window_start):
    """The window part of each query's key list: slot i of the query at position t holds
    position max(0, t - W + 1) + i, from this step's rows (positions[0]..t) or from the ring
    (slot pos % W, while it still holds pos); the slot is empty past t, before window_start
    (decoder bounded replay) or when the ring no longer holds the position.
    positions [R] (consecutive), ring_positions [W] (-1 = empty) -> (index [R, W] into
    cat(ring [W], this step's rows), valid [R, W] bool)."""
    first = (positions - window + 1).clamp_min(0)
    want = first[:, None] + torch.arange(window, device=positions.device)   # [R, W] positions
    p0 = positions[0]
    in_step = (want >= p0) & (want <= positions[:, None])
    ring_slot = want % window
    in_ring = (want < p0) & (ring_positions[ring_slot] == want)
    valid = (in_step | in_ring) & (want >= window_start)
    return torch.where(in_step, window + want - p0, ring_slot), valid


def candidate_mask(score, visible, block, top_blocks):
    """Candidate entries [R, E] bool (official select_candidate_blocks): blocks of `block`
    entries scored by their max (last block padded with -inf), the block of the newest visible
    entry forced to +inf, the top `top_blocks` blocks (torch.topk's choice among ties) kept when
    their score is not -inf."""
    R, E = score.shape
    nb = -(-E // block)
    padded = torch.full((R, nb * block), NEG_INF, device=score.device)
    padded[:, :E] = score
    blocks = padded.unflatten(-1, (nb, block)).amax(-1)                 # [R, nb]
    newest = visible - 1
    has = newest >= 0
    forced = torch.where(has, newest // block, torch.zeros_like(newest))
    blocks[has.nonzero().flatten(), forced[has]] = float("inf")
    chosen = ops.torch_topk(blocks, min(top_blocks, nb), sorted=True)
    keep = torch.zeros(R, nb, dtype=torch.bool, device=score.device)
    keep.scatter_(1, chosen, torch.gather(blocks, 1, chosen) > NEG_INF)
    return keep.repeat_interleave(block, dim=1)[:, :E]
