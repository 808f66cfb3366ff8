"""The DSpark draft head of V4.1 (MODEL-REFERENCE §10.1, docs/dspark.md) for training, batched
over many anchors at once, with the inference quantisers (straight-through, via Numerics) so the
exported codes are the ones this forward used.

One anchor P of a sequence stands for one draft of the engine: the stages' rings hold the target
features of positions max(0, P - W) .. P - 1 (slot = position mod W), the block is
[ids[P], noise x (B-1)] at positions P .. P+B-1, and row i predicts the token at P + 1 + i. The
official key list of every block row is the first min(W, P) ring slots in slot order, then the B
block rows; the softmax walks it in blocks of 64 slots (the same rounding points as
flashdesk_ref.ops.sparse_attention, written as in train/sparse_attention.py).

Parameter names equal the checkpoint's `mtp.*` names (dspark_export.py maps `stages.m.` to
`mtp.m.` and the stacked experts to experts.{e}); `embed` and `head` are the frozen target's.
"""
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import mhc
from .common import Norm, Weight
from flashdesk_ref.config import LayerRole
from .model import Block
from .rope import apply_rope, text_frequencies

F32 = torch.float32
LIST_BLOCK = 64   # key-list slots per step of the official kernel's online softmax


class DsparkConfig:
    """The head's config keys (the engine reads them from text_config)."""

    def __init__(self, block_size=5, stages=3, target_layers=(9, 10, 11), markov_rank=64,
                 n_experts=None, top_k=3, noise=None):
        self.block_size, self.stages = int(block_size), int(stages)
        self.target_layers, self.markov_rank = [int(l) for l in target_layers], int(markov_rank)
        self.n_experts, self.top_k, self.noise = n_experts, int(top_k), noise

    def keys(self, cfg):
        """text_config entries for a target config `cfg`."""
        return {"num_nextn_predict_layers": self.stages,
                "dspark_block_size": self.block_size,
                "dspark_noise_token_id": int(self.noise if self.noise is not None
                                             else cfg.raw["text_config"]["dspark_noise_token_id"]),
                "dspark_target_layer_ids": self.target_layers,
                "dspark_markov_rank": self.markov_rank,
                "dspark_n_routed_experts": int(self.n_experts or cfg.n_routed_experts),
                "dspark_num_experts_per_tok": self.top_k}

    @staticmethod
    def from_text_config(t):
        return DsparkConfig(t["dspark_block_size"], t["num_nextn_predict_layers"],
                            t["dspark_target_layer_ids"], t["dspark_markov_rank"],
                            t.get("dspark_n_routed_experts"), t.get("dspark_num_experts_per_tok", 3),
                            t["dspark_noise_token_id"])


class Stage(Block):
    """A draft stage: a main block with window-only attention and its own expert counts."""

    def __init__(self, cfg, layer, n_experts, top_k):
        super().__init__(cfg, LayerRole(layer=layer, ratio=0))
        if n_experts != cfg.n_routed_experts:
            raise ValueError("dspark_n_routed_experts other than the target's is not supported here")
        self.ffn.k = top_k


class DsparkHead(nn.Module):
    def __init__(self, cfg, dcfg):
        super().__init__()
        self.cfg, self.dcfg = cfg, dcfg
        dim = cfg.hidden_size
        n_exp = dcfg.n_experts or cfg.n_routed_experts
        self.stages = nn.ModuleList(Stage(cfg, cfg.num_hidden_layers + m, n_exp, dcfg.top_k)
                                    for m in range(dcfg.stages))
        first, last = self.stages[0], self.stages[-1]
        first.main_proj = Weight(dim, len(dcfg.target_layers) * dim)
        first.main_norm = Norm(dim)
        last.norm = Norm(dim)
        last.markov_head = nn.Module()
        last.markov_head.embed = nn.Embedding(cfg.vocab_size, dcfg.markov_rank)
        nn.init.normal_(last.markov_head.embed.weight, std=1.0)
        last.markov_head.head = Weight(cfg.vocab_size, dcfg.markov_rank, std=1e-2)
        last.confidence_head = nn.Module()
        last.confidence_head.proj = Weight(1, dim + dcfg.markov_rank, std=1e-3)
        self.freqs = text_frequencies(cfg.qk_rope_head_dim, cfg.rope_theta)   # no YaRN

    # ---- pieces --------------------------------------------------------------------------
    def _rope(self, positions):
        ang = positions.to(F32).unsqueeze(-1) * self.freqs.to(positions.device)
        return torch.cos(ang), torch.sin(ang)

    def main_x(self, num, features):
        """main_norm(main_proj(features)): [.., targets*dim] -> [.., dim]."""
        s0, eps = self.stages[0], self.cfg.rms_norm_eps
        return num.rms_norm(num.linear_fp8(features, s0.main_proj.weight), s0.main_norm.weight, eps)

    def context_kv(self, num, stage, main_x, positions):
        """A stage's ring rows: FP8(rope(kv_norm(wkv(main_x)))) [.., D]."""
        a, eps = stage.attn, self.cfg.rms_norm_eps
        cos, sin = self._rope(positions)
        kv = num.rms_norm(num.linear_fp8(main_x, a.wkv.weight), a.kv_norm.weight, eps)
        return num.kv_fp8(apply_rope(num, kv, cos, sin))

    def attention(self, num, stage, x, ctx_kv, anchors):
        """x [S, A, Bk, dim] block rows; ctx_kv [S, N, D] the stage's ring rows of every target
        position of the sequence; anchors [S, A] the P of each block. -> [S, A, Bk, dim]."""
        a, cfg, eps = stage.attn, self.cfg, self.cfg.rms_norm_eps
        S, A, Bk, _ = x.shape
        N, W, H, D = ctx_kv.shape[1], cfg.sliding_window, a.H, a.D
        dev = x.device
        positions = anchors.unsqueeze(-1) + torch.arange(Bk, device=dev)      # [S, A, Bk]
        cos, sin = self._rope(positions)
        xq = num.act_quant(x)
        qr = num.rms_norm(num.linear_fp8_q(xq, a.wq_a.weight), a.q_norm.weight, eps)
        q = num.linear_fp8_q(num.act_quant(qr), a.wq_b.weight).unflatten(-1, (H, D))
        q = apply_rope(num, q, cos.unsqueeze(-2), sin.unsqueeze(-2)).to(F32)
        kv = num.rms_norm(num.linear_fp8_q(xq, a.wkv.weight), a.kv_norm.weight, eps)
        kv = num.kv_fp8(apply_rope(num, kv, cos, sin)).to(F32)               # [S, A, Bk, D]
        scale = D ** -0.5
        # ring part: positions p in [max(0, P-W), P-1], list slot p mod W
        lc = torch.einsum("sabhd,snd->sabhn", q, ctx_kv.to(F32)) * scale      # [S, A, Bk, H, N]
        p = torch.arange(N, device=dev)
        P = anchors.unsqueeze(-1)                                              # [S, A, 1]
        ok = (p < P) & (p >= P - W)                                            # [S, A, N]
        lc = lc.masked_fill(~ok[:, :, None, None, :], float("-inf"))
        c_blocks = (p % W).div(LIST_BLOCK, rounding_mode="floor")              # [N]
        # block part: list slot min(W, P) + j
        lb = torch.einsum("sabhd,sajd->sabhj", q, kv) * scale                   # [S, A, Bk, H, Bk]
        b_blocks = (anchors.clamp_max(W).unsqueeze(-1) + torch.arange(Bk, device=dev)).div(
            LIST_BLOCK, rounding_mode="floor")                                 # [S, A, Bk]
        n_blocks = -(-(W + Bk) // LIST_BLOCK)
        with torch.no_grad():   # running maximum after each list block (a softmax shift)
            run, m = [], torch.full(lc.shape[:-1], -1e30, dtype=F32, device=dev)
            for b in range(n_blocks):
                m = torch.maximum(m, lc.masked_fill(c_blocks != b, float("-inf")).amax(-1))
                bm = (b_blocks != b)[:, :, None, None, :]
                m = torch.maximum(m, lb.masked_fill(bm, float("-inf")).amax(-1))
                run.append(m)
            run = torch.stack(run, -1)                                         # [S, A, Bk, H, nb]
        final = run[..., -1:]
        c_max = run[..., c_blocks]                                             # [S, A, Bk, H, N]
        b_max = torch.gather(run, -1, b_blocks[:, :, None, None, :].expand(S, A, Bk, H, Bk))
        den = (torch.exp(lc - final).sum(-1) + torch.exp(lb - final).sum(-1)
               + torch.exp(a.attn_sink.to(F32) - final[..., 0]))
        wc = _bf16(torch.exp(lc - c_max)) * torch.exp(c_max - final)
        wb = _bf16(torch.exp(lb - b_max)) * torch.exp(b_max - final)
        o = (torch.einsum("sabhn,snd->sabhd", wc, ctx_kv.to(F32))
             + torch.einsum("sabhj,sajd->sabhd", wb, kv)) / den.unsqueeze(-1)
        o = apply_rope(num, num.rb(o), cos.unsqueeze(-2), sin.unsqueeze(-2), inverse=True)
        G = cfg.o_groups
        wo_a = num.w_fp8(a.wo_a.weight).view(G, cfg.o_lora_rank, -1)
        z = num.rb(torch.einsum("...gi,goi->...go", o.reshape(S, A, Bk, G, -1), wo_a))
        return num.linear_fp8(z.flatten(-2), a.wo_b.weight)

    def stage_forward(self, num, stage, X, pre, ctx_kv, anchors, moe_ctx):
        eps = self.cfg.rms_norm_eps
        pre_a, post_a, comb_a = stage.mixes(X, "hc_attn")
        x = num.rms_norm(mhc.collapse(num, X, pre), stage.attn_norm.weight, eps)
        att = self.attention(num, stage, x, ctx_kv, anchors)
        X1 = mhc.expand(num, X, att, post_a, comb_a)
        pre_f, post_f, comb_f = stage.mixes(X1, "hc_ffn")
        x = num.rms_norm(mhc.collapse(num, X1, pre_a), stage.ffn_norm.weight, eps)
        shape = x.shape
        y = stage.ffn(num, x.reshape(1, -1, shape[-1]), moe_ctx, stage.role.layer).view(shape)
        return mhc.expand(num, X1, y, post_f, comb_f), pre_f

    # ---- the draft -------------------------------------------------------------------------
    def rows(self, num, embed, head, features, ids, anchors):
        """The stages over a batch of drafts.

        embed, head: the frozen target's [V, dim] weights; features [S, N, targets*dim] target
        features of every position; ids [S, N] the sequence (ids[P] is the block's first token);
        anchors [S, A] the P of each draft (1 <= P, P + B <= N).

        Returns (x [S, A, B, dim] the last collapse (before norm), base logits [S, A, B, V] FP32
        before the Markov correction, the stages' MoE balance losses)."""
        cfg, dc = self.cfg, self.dcfg
        S, A = anchors.shape
        Bk, dev = dc.block_size, ids.device
        main_x = self.main_x(num, features)
        positions = torch.arange(ids.shape[1], device=dev).expand(S, -1)
        block = torch.full((S, A, Bk), int(dc.noise), dtype=torch.long, device=dev)
        block[..., 0] = torch.gather(ids, 1, anchors)
        e = num.rb(F.embedding(block, embed))
        X = e.unsqueeze(-2).expand(S, A, Bk, cfg.hc_mult, cfg.hidden_size)
        pre = torch.zeros(S, A, Bk, cfg.hc_mult, dtype=F32, device=dev)
        pre[..., 0] = 1.0
        M = S * A * Bk
        moe_ctx = SimpleNamespace(valid_rows=torch.arange(M, device=dev),
                                  is_image=torch.zeros(1, M, dtype=torch.bool, device=dev),
                                  valid=torch.ones(1, M, dtype=torch.bool, device=dev),
                                  moe_stats=[], record=None)
        for stage in self.stages:
            ctx_kv = self.context_kv(num, stage, main_x, positions)
            X, pre = self.stage_forward(num, stage, X, pre, ctx_kv, anchors, moe_ctx)
        last = self.stages[-1]
        x = mhc.collapse(num, X, pre)
        base = num.linear_f32(num.rms_norm(x, last.norm.weight, cfg.rms_norm_eps), head)
        return x, base, [b for _, b in moe_ctx.moe_stats]

    def correct(self, num, x, base, markov_tokens):
        """Markov-corrected logits and confidence logits of rows x / base [.., B, ...] given the
        token before each row's prediction markov_tokens [.., B] (row 0: the block's first
        token; row i: the token row i - 1 predicted: teacher-forced with the target's tokens in
        training, the draft's own argmax at inference)."""
        last = self.stages[-1]
        me = num.rb(F.embedding(markov_tokens, last.markov_head.embed.weight))
        logits = base + num.linear_f32(me, last.markov_head.head.weight)
        conf = num.linear_f32(torch.cat((x.to(me.dtype), me), -1),
                              last.confidence_head.proj.weight)[..., 0]
        return logits, conf

    @torch.no_grad()
    def greedy(self, num, embed, head, features, ids, anchor):
        """One draft as the engine makes it, for one sequence (features [N, ..], ids [N]) after
        anchor P: (tokens [B], Markov-corrected logits [B, V], confidence logits [B])."""
        Bk = self.dcfg.block_size
        anchors = torch.tensor([[anchor]], device=ids.device)
        x, base, _ = self.rows(num, embed, head, features[None], ids[None], anchors)
        toks = torch.zeros(1, 1, Bk, dtype=torch.long, device=ids.device)
        tok, tokens = int(ids[anchor]), []
        for i in range(Bk):
            toks[0, 0, i] = tok
            logits, _ = self.correct(num, x[:, :, i:i + 1], base[:, :, i:i + 1], toks[:, :, i:i + 1])
            tok = int(torch.argmax(logits[0, 0, 0]))
            tokens.append(tok)
        logits, conf = self.correct(num, x, base, toks)
        return tokens, logits[0, 0], conf[0, 0]


def _bf16(x):
    """bf16(x) as FP32 with a straight-through gradient."""
    return x + (x.to(torch.bfloat16).to(F32) - x).detach()
