"""Per-sequence KV state (what the engine keeps between steps) and the per-step context.

All cached values are float32 holding the dequantised codes (exact): window rings FP8 values,
compressed KV FP4-E4M3 values, index keys FP4-E8M0 values; ratio-m compressors keep the FP32 kv
and score rows of an incomplete group.
"""
import torch

F32 = torch.float32


class LayerCache:
    """The 128-slot (sliding_window) ring of one layer: slot = position mod W."""

    def __init__(self, window, head_dim, device):
        self.kv = torch.zeros(window, head_dim, dtype=F32, device=device)          # [W, D]
        self.pos = torch.full((window,), -1, dtype=torch.long, device=device)     # [W], -1 = empty

    def write(self, kv, positions):
        """Stores the last min(T, W) rows of kv [T, D] at their slots."""
        w = self.kv.shape[0]
        kv, positions = kv[-w:], positions[-w:]
        slots = positions % w
        self.kv = self.kv.clone()
        self.pos = self.pos.clone()
        self.kv[slots] = kv
        self.pos[slots] = positions


class SourceCache:
    """A KV source's shared global state: compressed entries and index keys."""

    def __init__(self, head_dim, index_head_dim, device):
        self.comp_kv = torch.zeros(0, head_dim, dtype=F32, device=device)           # [E, D]
        self.index_k = torch.zeros(0, index_head_dim, dtype=F32, device=device)     # [E, d_ih]
        self.pending_kv = torch.zeros(0, head_dim, dtype=F32, device=device)        # [n < m, D] FP32
        self.pending_score = torch.zeros(0, head_dim, dtype=F32, device=device)     # [n < m, D] FP32

    @property
    def entries(self):
        return self.comp_kv.shape[0]


class SequenceState:
    """Everything a sequence carries from one step to the next."""

    def __init__(self, cfg, device="cpu"):
        self.pos = 0                 # tokens processed so far
        self.tokens = []             # every token id fed (Engram hashing looks back)
        self.dead = []               # per token: inside an image span (Engram pad, gate 0)
        self.layers = [LayerCache(cfg.sliding_window, cfg.head_dim, device)
                       for _ in range(cfg.num_hidden_layers)]
        self.sources = {r.layer: SourceCache(cfg.head_dim, cfg.index_head_dim, device)
                        for r in cfg.roles if r.role == "full"}


class Step:
    """Context of one forward step over T tokens at positions pos0..pos0+T-1."""

    def __init__(self, pos0, count, window, device="cpu", prompt_end=0):
        self.pos0 = pos0
        self.count = count
        # one past the prompt this step is part of (at least the step's end): top-k rows span the
        # entries existing there (docs/numerics.md "Top-k"), so a prompt fed in several steps
        # selects as its one-shot prefill does
        self.prompt_end = max(prompt_end, pos0 + count)
        self.positions = torch.arange(pos0, pos0 + count, dtype=torch.long, device=device)
        # ids published by the indexer are offset by the window region: the step's raw KV at
        # prefill (T), the ring at decode (W)
        self.offset = count if pos0 == 0 else window
        self.window_start = 0         # bounded replay: first position the decoder window sees
        self.topk = {}                # index-source layer -> (row0, [R, k] entry ids, -1 = none)
        self.candidates = {}          # candidate-source layer -> (row0, [R, E] bool)
