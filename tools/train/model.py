"""The V4.1 text model (+ vision) for training: embedding into hc streams, blocks of Engram ->
single-pass mHC -> CSA2 attention -> mHC -> MoE, final collapse, norm and FP32 head
(docs/model-spec.md §11.2; numerics per docs/numerics.md through `Numerics`).

Parameter paths equal checkpoint names except the stacked routed experts (ffn.experts_w1/w3/w2,
[E, out, in]) which the exporter writes as ffn.experts.{e}.w1/w3/w2.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from . import mhc
from .attention import Attention
from .common import Norm, Weight
from .engram import Engram
from .moe import MoE
from .regions import region
from .rope import RopeTables
from .vision import Aligner, VisionTower, packed_cells

F32 = torch.float32


class Block(nn.Module):
    def __init__(self, cfg, role, engram_rows=None):
        super().__init__()
        self.cfg, self.role = cfg, role
        hc, dim = cfg.hc_mult, cfg.hidden_size
        mix = (2 + hc) * hc
        if engram_rows is not None:
            self.engram = Engram(cfg, engram_rows)
        self.attn_norm, self.ffn_norm = Norm(dim), Norm(dim)
        for sub in ("hc_attn", "hc_ffn"):
            setattr(self, sub + "_fn", nn.Parameter(torch.randn(mix, hc * dim) * 1e-3))
            base = torch.zeros(mix)
            base[hc:2 * hc] = 0.0                         # post = 2*sigmoid(0) = 1
            base[2 * hc:] = torch.eye(hc).flatten() * 4.0  # comb starts near the identity
            setattr(self, sub + "_base", nn.Parameter(base))
            setattr(self, sub + "_scale", nn.Parameter(torch.full((3,), 0.1)))
        self.attn = Attention(cfg, role)
        self.ffn = MoE(cfg)
        self.checkpoint_mixes = False
        self.mhc_impl = "loop"  # mhc.IMPLS

    def mixes(self, X, sub):
        cfg = self.cfg
        args = (X, getattr(self, sub + "_fn"), getattr(self, sub + "_base"),
                getattr(self, sub + "_scale"), cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.rms_norm_eps)
        if self.checkpoint_mixes and torch.is_grad_enabled():
            return checkpoint(mhc.hc_mixes, *args, use_reentrant=False)
        return mhc.hc_mixes(*args)

    def forward(self, num, X, pre_in, ctx, engram_index=-1):
        """X [B, N, hc, D], pre_in [B, N, hc] -> (X2, pre_f)."""
        eps = self.cfg.rms_norm_eps
        if engram_index >= 0:
            with region("engram"):
                X = self.engram(num, X, ctx.engram_ids[:, :, engram_index], ctx.is_image)
            if ctx.record is not None:
                ctx.record.setdefault("engram_out", {})[self.role.layer] = X.detach()
        with region("mhc"):
            pre_a, post_a, comb_a = self.mixes(X, "hc_attn")
            x = num.rms_norm(mhc.collapse(num, X, pre_in, self.mhc_impl), self.attn_norm.weight, eps)
        with region("attention"):
            a = self.attn(num, x, ctx)
        with region("mhc"):
            X1 = mhc.expand(num, X, a, post_a, comb_a, self.mhc_impl)
            pre_f, post_f, comb_f = self.mixes(X1, "hc_ffn")
            x = num.rms_norm(mhc.collapse(num, X1, pre_a, self.mhc_impl), self.ffn_norm.weight, eps)
        with region("moe"):
            y = self.ffn(num, x, ctx, self.role.layer)
        if ctx.record is not None:
            ctx.record.setdefault("attn_out", {})[self.role.layer] = a.detach()
            ctx.record.setdefault("ffn_out", {})[self.role.layer] = y.detach()
        with region("mhc"):
            return mhc.expand(num, X1, y, post_f, comb_f, self.mhc_impl), pre_f


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.rope = RopeTables(cfg)
        dim, V = cfg.hidden_size, cfg.vocab_size
        self.embed = nn.Embedding(V, dim)
        nn.init.normal_(self.embed.weight, std=1.0)
        rows = dict(zip(cfg.engram_layer_ids, cfg.engram_num_embeddings))
        self.layers = nn.ModuleList(Block(cfg, r, rows.get(r.layer)) for r in cfg.roles)
        self.engram_index = {l: i for i, l in enumerate(cfg.engram_layer_ids)}
        self.norm = Norm(dim)
        self.head = Weight(V, dim)
        self.mhc_impl = "loop"
        if cfg.vision is not None:
            self.vision = VisionTower(cfg.vision)
            self.aligner = Aligner(cfg.vision, dim)
            for name in ("image_start", "image_end", "image_newline"):
                setattr(self, name, nn.Parameter(torch.randn(dim) * 0.5))

    def set_moe_impl(self, impl):
        """"sorted" (per-expert GEMMs on routed tokens) or "dense" (see MoE.impl)."""
        for blk in self.layers:
            blk.ffn.impl = impl

    def set_mhc_impl(self, impl):
        """"loop" or "matmul" for the mHC collapse and expand (see mhc.py)."""
        if impl not in mhc.IMPLS:
            raise ValueError(f"mhc_impl must be one of {mhc.IMPLS}, not {impl!r}")
        self.mhc_impl = impl
        for blk in self.layers:
            blk.mhc_impl = impl

    def set_checkpointing(self, attention=False, experts=False, mixes=False):
        for blk in self.layers:
            blk.attn.use_checkpoint = attention
            blk.ffn.use_checkpoint = experts
            blk.checkpoint_mixes = mixes

    def embed_tokens(self, num, batch):
        """[B, N, dim]: BF16 embedding rows, image spans overwritten by aligner rows and the
        start / newline / end vectors (one vision call per pack of pictures: image_pack.py)."""
        B, N = batch.ids.shape
        emb = num.rb(F.embedding(batch.ids, self.embed.weight)).reshape(B * N, -1)
        for pack in batch.images:
            with region("vision"):
                rows = packed_cells(num, self.vision, self.aligner, pack)      # [cells, dim]
            dim = rows.shape[-1]
            vec = lambda p, k: num.w_bf16(p).to(rows.dtype).view(1, dim).expand(k, dim)
            src = torch.cat((rows, vec(self.image_newline, len(pack.newline_pos)),
                             vec(self.image_start, len(pack.start_pos)),
                             vec(self.image_end, len(pack.end_pos))))
            pos = torch.cat((pack.cell_pos, pack.newline_pos, pack.start_pos, pack.end_pos))
            emb = emb.index_copy(0, pos, src.to(emb.dtype))
        return emb.view(B, N, -1)

    def forward(self, num, batch, ctx):
        """Final hidden state h [B, N, dim] (after the last collapse and `norm`)."""
        cfg = self.cfg
        emb = self.embed_tokens(num, batch)
        B, N, dim = emb.shape
        if ctx.record is not None:
            ctx.record["embed"] = emb.detach()
        X = emb.unsqueeze(2).expand(B, N, cfg.hc_mult, dim)
        pre = torch.zeros(B, N, cfg.hc_mult, dtype=F32, device=emb.device)
        pre[..., 0] = 1.0
        for blk in self.layers:
            X, pre = blk(num, X, pre, ctx, self.engram_index.get(blk.role.layer, -1))
            if ctx.record is not None:
                ctx.record.setdefault("block_out", []).append(X.detach())
                ctx.record.setdefault("block_pre_mix", []).append(pre.detach())
        return num.rms_norm(mhc.collapse(num, X, pre, self.mhc_impl), self.norm.weight, cfg.rms_norm_eps)

    def logits(self, num, h):
        """FP32 logits of hidden rows h [..., dim]."""
        return num.linear_f32(h, self.head.weight)

    def moe_layers(self):
        return [blk.ffn for blk in self.layers]
