"""The DSpark draft head of DeepSeek-V4.1, as the official forward computes it
(MODEL-REFERENCE §10.1; inference/model.py DSparkAttention, DSparkBlock, forward_spec at HF
revision dba1be0a), written over this oracle's ops: target features = the mean over the hc
streams of the input of each target layer; main_x = main_norm(main_proj(features)); every stage
keeps its own window ring of kv_norm(wkv(main_x)) (RoPE, FP8 values) at the target positions; a
draft is the block [last, noise x (B-1)] at positions P..P+B-1 through the stages (single-pass
mHC, window-only attention over the first min(W, P) ring slots then every block row, MoE), the
last pre-mix collapse, norm and head, the sequential Markov bigram correction and the confidence
head.

Usage:
    draft = Draft(checkpoint, model)          # model: flashdesk_ref.model.Model
    features = draft.record(model)            # target features of every later model.step
    logits = model.step(state, prompt)
    draft.seed(rings, features.take(), first_position)
    tokens, logits, confidence = draft.draft(rings, P, last)
"""
import torch

from . import ops
from .attention import Attention
from .config import LayerRole
from .model import Block
from .moe import MoE
from .quant import bf16
from .state import LayerCache

F32 = torch.float32


class Features:
    """Collects the target layers' inputs from Block.forward (its `record` hook)."""

    def __init__(self, targets):
        self.targets = list(targets)
        self.rows = {}

    def put(self, layer, X):
        """X [T, hc, dim]: the official h.mean(dim=2) of bf16 streams (FP32 mean, bf16 out)."""
        self.rows[layer] = bf16(X.mean(dim=1))

    def take(self):
        """[T, targets * dim]: the concatenation in target-layer order; clears."""
        out = torch.cat([self.rows[l] for l in self.targets], dim=-1)
        self.rows = {}
        return out


class StageMoE(MoE):
    """A stage's MoE: the dspark expert counts, no VL bias (drafts are text)."""

    def __init__(self, cfg, stage_prefix, weights, R, n_experts, k):
        super().__init__(cfg, 0, {}, R)
        self.w = {k2[len(stage_prefix):]: v for k2, v in weights.items() if k2.startswith(stage_prefix)}
        self.k = k
        self.n_experts = n_experts

    def forward(self, x, image_rows=None):
        ids, weights = self.route(x, None)
        xq = self.R.act_quant(x)
        y = torch.zeros_like(x)
        for e in range(self.n_experts):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            y = y.index_add(0, rows, self.expert(xq[rows], f"experts.{e}.", weights[rows, slot]))
        if self.cfg.n_shared_experts > 0:
            y = y + self.expert(xq, "shared_experts.")
        return self.R.bf16(y), ids, weights


class Draft:
    def __init__(self, checkpoint, model):
        cfg = self.cfg = model.cfg
        t = cfg.raw.get("text_config", cfg.raw)
        self.B = int(t["dspark_block_size"])
        self.noise = int(t["dspark_noise_token_id"])
        self.targets = [int(l) for l in t["dspark_target_layer_ids"]]
        self.n_stages = int(t.get("num_nextn_predict_layers", 1))
        n_experts = int(t.get("dspark_n_routed_experts") or cfg.n_routed_experts)
        k = int(t.get("dspark_num_experts_per_tok") or cfg.num_experts_per_tok)
        self.R, self.model = model.R, model
        w = {n: v.to(model.device) for n, v in checkpoint.tensors.items()}
        self.w = w
        self.stages = []
        for m in range(self.n_stages):
            layer = cfg.num_hidden_layers + m
            src, dst = f"mtp.{m}.", f"layers.{layer}."
            # the oracle's Block reads layers.<l>.*: the stage's tensors under that name
            renamed = {dst + n[len(src):]: v for n, v in w.items() if n.startswith(src)}
            renamed["embed.weight"] = w["embed.weight"]
            blk = Block(cfg, LayerRole(layer=layer, ratio=0), renamed, self.R, None)
            blk.moe = StageMoE(cfg, dst + "ffn.", renamed, self.R, n_experts, k)
            self.stages.append(blk)
        last = f"mtp.{self.n_stages - 1}."
        self.norm_w = w[last + "norm.weight"]
        self.markov_embed = w[last + "markov_head.embed.weight"]
        self.markov_head = w[last + "markov_head.head.weight"]
        self.confidence_w = w[last + "confidence_head.proj.weight"]

    def record(self, model):
        """Makes the model's target blocks hand their inputs to a Features."""
        features = Features(self.targets)
        for blk in model.blocks:
            blk.record = features if blk.layer in self.targets else None
        return features

    def new_rings(self):
        return [LayerCache(self.cfg.sliding_window, self.cfg.head_dim, self.model.device)
                for _ in self.stages]

    def seed(self, rings, features, first):
        """Writes the main-x KV of target positions first.. into every stage's ring."""
        R, cfg = self.R, self.cfg
        main_x = ops.rms_norm(R, ops.fp8_linear(R, features, self.w["mtp.0.main_proj.weight"]),
                              self.w["mtp.0.main_norm.weight"], cfg.rms_norm_eps)
        positions = first + torch.arange(features.shape[0], dtype=torch.long, device=features.device)
        for blk, ring in zip(self.stages, rings):
            a = blk.attn
            cos, sin = ops.rope_cos_sin(a.freqs, positions)
            kv = a.norm(ops.fp8_linear(R, main_x, a.w["wkv.weight"]), "kv_norm")
            ring.write(R.act_quant(ops.rope_tail(R, kv, cos, sin), 32), positions)

    def attention(self, blk, ring, x, positions, P):
        R, a = self.R, blk.attn
        cos, sin = ops.rope_cos_sin(a.freqs, positions)
        qr = a.norm(ops.fp8_linear(R, x, a.w["wq_a.weight"]), "q_norm")
        q = ops.fp8_linear(R, qr, a.w["wq_b.weight"]).unflatten(-1, (a.H, a.D))
        q = ops.rope_tail(R, q, cos, sin)
        kv = a.norm(ops.fp8_linear(R, x, a.w["wkv.weight"]), "kv_norm")
        kv = R.act_quant(ops.rope_tail(R, kv, cos, sin), 32)
        # the official topk_idxs: arange(min(W, P)) of the ring, then W + arange(B)
        listed = min(a.W, P)
        keys = torch.cat((ring.kv[:listed], kv))                       # [N, D]
        n = x.shape[0]
        keys = keys[None].expand(n, *keys.shape)
        valid = torch.ones(keys.shape[:2], dtype=torch.bool, device=keys.device)
        o = R.bf16(ops.sparse_attention(R, q, keys, valid, a.w["attn_sink"], a.scale))
        return a.output(ops.rope_tail(R, o, cos, sin, inverse=True))

    def stage(self, blk, ring, X, pre, positions, P):
        R = self.R
        pre_a, post_a, comb_a = blk.mixes(X, "attn")
        att = self.attention(blk, ring, blk.attn_input(X, pre), positions, P)
        X1 = ops.hc_expand(R, X, att, post_a, comb_a)
        pre_f, post_f, comb_f = blk.mixes(X1, "ffn")
        x = ops.rms_norm(R, ops.hc_collapse(R, X1, pre_a), blk.w["ffn_norm.weight"], self.cfg.rms_norm_eps)
        y, _, _ = blk.moe.forward(x)
        return ops.hc_expand(R, X1, y, post_f, comb_f), pre_f

    def draft(self, rings, P, last):
        """Greedy draft after P seeded target positions: (tokens [B], logits [B, V], confidence [B])."""
        R, cfg, dev = self.R, self.cfg, self.model.device
        ids = torch.full((self.B,), self.noise, dtype=torch.long, device=dev)
        ids[0] = last
        positions = P + torch.arange(self.B, dtype=torch.long, device=dev)
        X = self.model.embed[ids][:, None, :].expand(self.B, cfg.hc_mult, cfg.hidden_size).clone()
        pre = torch.zeros(self.B, cfg.hc_mult, dtype=F32, device=dev)
        pre[:, 0] = 1.0
        for blk, ring in zip(self.stages, rings):
            X, pre = self.stage(blk, ring, X, pre, positions, P)
        x = ops.hc_collapse(R, X, pre)
        logits = ops.f32_linear(R, ops.rms_norm(R, x, self.norm_w, cfg.rms_norm_eps), self.model.head)
        tokens, embeds, token = [], [], last
        for i in range(self.B):
            e = self.markov_embed[token]
            logits[i] = logits[i] + ops.f32_linear(R, e[None], self.markov_head)[0]
            token = int(torch.argmax(logits[i]))
            tokens.append(token)
            embeds.append(e)
        conf = ops.f32_linear(R, torch.cat((x, torch.stack(embeds)), dim=-1), self.confidence_w)
        return tokens, logits, conf[:, 0]
