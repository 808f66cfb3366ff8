"""Per-forward state shared between layers: positions and window bounds, RoPE tables, the KV
sources' compressed entries and index keys, the index sources' selections and candidate masks,
and the indexer-distillation accumulators.

Shapes: B rows of N positions (N a multiple of the window W; padding at the end of a row never
influences real positions, all attention being causal).
"""
from dataclasses import dataclass, field
from typing import Dict, Optional

import torch


@dataclass
class Selection:
    """Compressed entries a query attends: top-k ids idx [B, N, k] with valid [B, N, k]
    (sparse), or every visible entry (dense warm-up: idx None, visibility from n_visible)."""
    idx: Optional[torch.Tensor]
    valid: Optional[torch.Tensor]


@dataclass
class IndexState:
    """What an index source needs to compute its distillation loss after the forward."""
    qi: torch.Tensor        # [B, N, n_ih, d_ih] index queries (grad to the indexer only)
    ik: torch.Tensor        # [B, E, d_ih] index keys of its KV source
    w: torch.Tensor         # [B, N, n_ih] head weights (FP32)
    sel: Selection
    ratio: int
    target: Optional[torch.Tensor] = None  # head/layer-summed attention over the selection


@dataclass
class ForwardContext:
    ids: torch.Tensor                 # [B, N] token ids
    valid: torch.Tensor               # [B, N] real (non-padding) positions
    valid_rows: torch.Tensor          # [n_valid] flat indices of the real positions
    is_image: torch.Tensor            # [B, N] image-span positions (bias_vl, Engram dead)
    window: int
    lo_encoder: torch.Tensor          # [B, N] lowest window key position per query
    lo_decoder: torch.Tensor          # [B, N] same for decoder layers (bounded replay rows)
    rope: object                      # RopeTables
    dense: bool = False               # dense warm-up: attend every visible compressed entry
    cpu_topk: bool = False            # torch.topk on the CPU over rows as wide as each
    #                                   sequence's real entries: the tie choice of inference
    #                                   (eval / oracle comparison); off: topk on the device
    distill: bool = True              # collect indexer distillation targets
    engram_ids: Optional[torch.Tensor] = None  # [B, N, n_engram_layers, cols]
    kv: Dict[int, tuple] = field(default_factory=dict)        # layer -> (kvc, ik)
    sel: Dict[int, Selection] = field(default_factory=dict)   # index source -> selection
    cand: Dict[int, torch.Tensor] = field(default_factory=dict)
    index_state: Dict[int, IndexState] = field(default_factory=dict)
    moe_stats: list = field(default_factory=list)             # (layer, balance loss)
    record: Optional[dict] = None     # optional per-layer dumps (tests, oracle check)

    @property
    def shape(self):
        return self.ids.shape

    def real_entries(self, ratio):
        """[B] compressed entries at the end of each row's real tokens: floor(len / ratio)."""
        return torch.div(self.valid.sum(1), ratio, rounding_mode="floor")

    def n_visible(self, ratio):
        """[N] number of compressed entries visible to each query: floor((t+1)/m)."""
        n = self.ids.shape[1]
        return torch.div(torch.arange(1, n + 1, device=self.ids.device), ratio,
                         rounding_mode="floor")


def window_bounds(n, window, bounded_start, device):
    """(lo_encoder, lo_decoder) [B, N]: query t sees window keys [lo, t]. Encoder rows use
    max(0, t-W+1); a decoder row with bounded-replay start s >= 0 uses max(s, t-W+1) for t >= s
    (positions before s keep the exact window: their values equal the exact forward)."""
    t = torch.arange(n, device=device)
    lo = (t - window + 1).clamp_min(0).unsqueeze(0).expand(bounded_start.shape[0], n)
    s = bounded_start.to(device).unsqueeze(1)
    bounded = (s >= 0) & (t.unsqueeze(0) >= s)
    return lo, torch.where(bounded, torch.maximum(lo, s), lo)
