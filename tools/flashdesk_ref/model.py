"""The DeepSeek-V4.1 text forward: embedding into hc streams, blocks (Engram, single-pass mHC,
CSA2 attention, MoE), final collapse / norm / head (docs/model-spec.md §4.3, §11.2).

Usage:
    model = Model(Checkpoint(dir))
    state = model.new_state()
    logits = model.step(state, prompt_ids, bounded=False)      # prefill from position 0
    logits = model.step(state, [next_id])                      # one decode step
"""
import torch

from . import ops
from .attention import Attention
from .engram import Engram
from .engram_hash import EngramHasher
from .moe import MoE
from .safetensors import FormatError
from .state import SequenceState, Step

F32 = torch.float32


class NullTrace:
    """Records nothing; Trace (trace.py) records per-block tensors for dumps."""

    def put(self, name, layer, tensor, row0=0):
        pass


class Block:
    def __init__(self, cfg, role, weights, R, engram):
        self.cfg, self.role, self.R, self.engram = cfg, role, R, engram
        self.layer = role.layer
        p = f"layers.{role.layer}."
        self.w = {k[len(p):]: v for k, v in weights.items() if k.startswith(p)}
        self.attn = Attention(cfg, role, weights, R)
        self.moe = MoE(cfg, role.layer, weights, R)
        self.record = None  # DSpark target layers: takes this block's input (dspark.Features)

    def mixes(self, X, kind):
        c = self.cfg
        return ops.hc_mixes(self.R, X, self.w[f"hc_{kind}_fn"], self.w[f"hc_{kind}_base"],
                            self.w[f"hc_{kind}_scale"], c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters)

    def attn_input(self, X, pre):
        """attn_norm(bf16(sum_j pre_j X_j)): the attention sublayer's input [R, dim]."""
        u = ops.hc_collapse(self.R, X, pre)
        return ops.rms_norm(self.R, u, self.w["attn_norm.weight"], self.cfg.rms_norm_eps)

    def forward(self, X, pre, positions, state, step, trace, hash_ids, dead_rows, compress_done):
        """X [R, hc, dim], incoming pre [R, hc] -> (X2, pre_f)."""
        R, l = self.R, self.layer
        row0 = int(positions[0] - step.pos0)
        if self.engram is not None:
            X = self.engram.forward(X, hash_ids, dead_rows)
            trace.put("engram_out", l, X, row0)
        if self.record is not None:
            self.record.put(l, X)
        pre_a, post_a, comb_a = self.mixes(X, "attn")
        a = self.attn.forward(self.attn_input(X, pre), positions, state, step, trace, compress_done)
        X1 = ops.hc_expand(R, X, a, post_a, comb_a)
        pre_f, post_f, comb_f = self.mixes(X1, "ffn")
        x = ops.rms_norm(R, ops.hc_collapse(R, X1, pre_a), self.w["ffn_norm.weight"], self.cfg.rms_norm_eps)
        y, ids, weights = self.moe.forward(x, dead_rows)
        X2 = ops.hc_expand(R, X1, y, post_f, comb_f)
        for name, t in (("attn_out", a), ("ffn_out", y), ("expert_ids", ids),
                        ("expert_weights", weights), ("block_out", X2), ("block_pre_mix", pre_f),
                        ("positions_run", torch.ones(X2.shape[0], dtype=torch.uint8, device=X2.device))):
            trace.put(name, l, t, row0)
        return X2, pre_f


class Model:
    def __init__(self, checkpoint, rounding=None, device="cpu"):
        """rounding: ops.Rounding() (inference, the default) or ops.Rounding(ste=True,
        exact_sums=False) for quantisation-aware training. device: where weights and state live
        (the Engram tables stay in host memory; gathered rows are moved)."""
        cfg = self.cfg = checkpoint.config
        self.R = rounding or ops.Rounding()
        self.device = torch.device(device)
        w = {k: v.to(self.device) for k, v in checkpoint.tensors.items()}
        self.embed, self.head, self.norm_w = w["embed.weight"], w["head.weight"], w["norm.weight"]
        self.hasher = None
        engram_of = {}
        if cfg.engram_layer_ids:
            self.hasher = EngramHasher(cfg, *checkpoint.engram_map)
            for e, l in enumerate(cfg.engram_layer_ids):
                table = checkpoint.engram_tables.get(f"layers.{l}.engram.embed")
                if table is None:
                    raise FormatError(f"{checkpoint.dir}: Engram layer {l} has no engram.embed table")
                if table.rows != int(self.hasher.rows[e]) or table.rows != cfg.engram_num_embeddings[e]:
                    raise FormatError(f"{checkpoint.dir}: layers.{l}.engram.embed has {table.rows} rows; "
                                      f"the primes give {int(self.hasher.rows[e])}, config "
                                      f"engram_num_embeddings says {cfg.engram_num_embeddings[e]}")
                engram_of[l] = Engram(cfg, l, w, table, self.R)
        self.blocks = [Block(cfg, r, w, self.R, engram_of.get(r.layer)) for r in cfg.roles]

    def new_state(self):
        return SequenceState(self.cfg, self.device)

    def step(self, state, tokens, bounded=False, trace=None, overrides=None, dead=None,
             all_logits=False, image_rows=None, prompt_end=0):
        """Runs `tokens` at positions state.pos.. and returns FP32 logits [1 or T, V].
        bounded: decoder bounded replay (prefill from position 0 only). overrides(layer, step)
        -> (X [T, hc, dim], pre [T, hc]) or None replaces a block's inputs (--block-inputs).
        dead: per token, inside an image span (bias_vl routing, Engram pad / gate 0).
        image_rows: [(first, rows [L, dim])] embeddings replacing those of tokens first.. (image
        spans from the vision tower, docs/model-spec.md §8); their tokens should be marked dead.
        prompt_end: when these tokens are a chunk of a longer prompt, the position one past its
        end (top-k rows span the entries existing there, as in the one-shot prefill); 0 = the
        end of this step (a one-shot prefill or a decode step)."""
        cfg, R = self.cfg, self.R
        trace = trace or NullTrace()
        T = len(tokens)
        self._check_tokens(state, tokens)
        dead = list(dead) if dead is not None else [False] * T
        dev = self.device
        step = Step(state.pos, T, cfg.sliding_window, dev, prompt_end)
        positions = step.positions
        hashes = None
        if self.hasher is not None:   # n-grams look back into earlier steps' tokens
            hashes = self.hasher.hash_ids(state.tokens + [int(t) for t in tokens], state.dead + dead,
                                          positions.tolist())
            hashes = torch.from_numpy(hashes).to(dev)
        state.tokens.extend(int(t) for t in tokens)
        state.dead.extend(dead)
        dead_rows = torch.tensor(dead, dtype=torch.bool, device=dev)

        emb = self.embed[torch.tensor(tokens, dtype=torch.long, device=dev)]           # [T, dim]
        for first, rows in image_rows or ():
            emb = emb.clone()
            emb[first:first + rows.shape[0]] = rows.to(emb.dtype).to(dev)
        trace.put("embed", None, emb)
        if hashes is not None:
            trace.put("engram_hash_ids", None, hashes)
        X = emb[:, None, :].expand(T, cfg.hc_mult, cfg.hidden_size).clone()
        pre = torch.zeros(T, cfg.hc_mult, dtype=F32, device=dev)
        pre[:, 0] = 1.0

        row0 = 0
        for blk in self.blocks:
            l = blk.layer
            if overrides is not None:
                replaced = overrides(l, step)
                if replaced is not None:
                    X, pre = replaced[0][row0:].to(dev), replaced[1][row0:].to(dev)
            compress_done = False
            if bounded and l == cfg.decoder_first_layer and step.pos0 == 0:
                # decoder bounded replay: the first decoder layer's compressor sees every token,
                # then the decoder runs on the last min(P, W) tokens with the window from s on
                blk.attn.compress(blk.attn_input(X, pre), positions, state.sources[l])
                compress_done = True
                row0 = T - min(T, cfg.sliding_window)
                X, pre = X[row0:], pre[row0:]
                step.window_start = row0
            hid = None
            if blk.engram is not None:
                hid = hashes[row0:, cfg.engram_layer_ids.index(l)]
            X, pre = blk.forward(X, pre, positions[row0:], state, step, trace, hid,
                                 dead_rows[row0:], compress_done)

        state.pos += T
        if all_logits and row0 > 0:
            raise ValueError("all-position logits need exact prefill (bounded mode runs the decoder on the tail)")
        rows = slice(None) if all_logits else slice(-1, None)
        h = ops.hc_collapse(R, X[rows], pre[rows])
        h = ops.rms_norm(R, h, self.norm_w, cfg.rms_norm_eps)
        return ops.f32_linear(R, h, self.head)

    def _check_tokens(self, state, tokens):
        cfg = self.cfg
        if len(tokens) == 0:
            raise ValueError("a step needs at least one token")
        bad = [t for t in tokens if not 0 <= int(t) < cfg.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} outside 0..{cfg.vocab_size - 1}")
        if state.pos + len(tokens) > cfg.max_position_embeddings:
            raise ValueError(f"{state.pos + len(tokens)} positions exceed max_position_embeddings "
                             f"{cfg.max_position_embeddings}")
