"""Training samples and their collation into padded device batches.

A Sample is one rendered conversation: token ids, which tokens are targets, where the final
answer starts (P: the prompt is ids[:P]) and its images. A Batch is B samples padded to a common
length N (a multiple of the window), with targets aligned to the logit positions, and the
bounded-replay start s = P - W of rows trained in bounded mode (-1: exact).
"""
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch

from .image_pack import ImagePack, pack_images


@dataclass
class SampleImage:
    start: int              # position of IMAGE_START in the sample
    pixels: np.ndarray      # [vit_h*vit_w, 3*p*p] float32 normalised patches, row-major
    vit_h: int
    vit_w: int
    llm_h: int              # aligner grid: ceil(vit_h / r) x ceil(vit_w / r)
    llm_w: int


@dataclass
class Sample:
    task: str
    ids: np.ndarray                 # int64 [L]
    target: np.ndarray              # bool [L]: token i is trained (predicted at position i-1)
    answer_start: int               # P: first position of the final answer
    images: List[SampleImage] = field(default_factory=list)
    image_mask: Optional[np.ndarray] = None   # bool [L]: positions inside image spans
    answer_from: Optional[int] = None         # first token after the final answer's </think>

    def __len__(self):
        return len(self.ids)


@dataclass
class Batch:
    ids: torch.Tensor            # [B, N] int64
    targets: torch.Tensor        # [B, N] int64: token at position n+1 (logit-aligned)
    loss_mask: torch.Tensor      # [B, N] bool: logit position n is trained
    valid: torch.Tensor          # [B, N] bool: real tokens
    valid_rows: torch.Tensor     # [n_valid] flat indices of real tokens (computed on the host)
    loss_rows: torch.Tensor      # [n_loss] flat indices of trained logit positions
    is_image: torch.Tensor       # [B, N] bool
    bounded_start: torch.Tensor  # [B] int64, -1 for exact rows
    answer_start: torch.Tensor   # [B] int64 (P)
    answer_from: torch.Tensor    # [B] int64: first answer token after </think> (P if none)
    images: List[ImagePack]      # the batch's pictures in a few padded sets (image_pack.py)
    tasks: List[str]

    def to(self, device):
        moved = {k: (v.to(device, non_blocking=True) if torch.is_tensor(v) else v)
                 for k, v in self.__dict__.items() if k not in ("images",)}
        return Batch(images=[p.to(device) for p in self.images], **moved)

    @property
    def n_loss_tokens(self):
        return int(self.loss_rows.numel())

    @property
    def n_valid(self):
        return int(self.valid_rows.numel())


def collate(samples, pad_multiple, window, bounded, keep_prefix_loss=True, pad_id=2):
    """Pads `samples` into a Batch. bounded[i] True: row i uses bounded replay from
    s = P - min(P, W); its loss keeps targets >= P and, when keep_prefix_loss, the targets
    predicted at positions < s (whose values equal the exact forward)."""
    L = max(len(s) for s in samples)
    N = -(-L // pad_multiple) * pad_multiple
    B = len(samples)
    ids = np.full((B, N), pad_id, np.int64)
    tgt_mask = np.zeros((B, N), bool)
    valid = np.zeros((B, N), bool)
    img = np.zeros((B, N), bool)
    bstart = np.full(B, -1, np.int64)
    for i, s in enumerate(samples):
        n = len(s)
        ids[i, :n] = s.ids
        valid[i, :n] = True
        if s.image_mask is not None:
            img[i, :n] = s.image_mask
        m = np.zeros(N, bool)
        m[:n - 1] = s.target[1:n]            # logit position p predicts token p+1
        P = s.answer_start
        if bounded[i] and P > window:
            st = P - window
            keep = np.zeros(N, bool)
            keep[P - 1:] = True
            if keep_prefix_loss:
                keep[:st] = True
            m &= keep
            bstart[i] = st
        tgt_mask[i] = m
    targets = np.concatenate([ids[:, 1:], np.full((B, 1), pad_id, np.int64)], axis=1)
    return Batch(torch.from_numpy(ids), torch.from_numpy(targets), torch.from_numpy(tgt_mask),
                 torch.from_numpy(valid), torch.from_numpy(np.flatnonzero(valid)),
                 torch.from_numpy(np.flatnonzero(tgt_mask)), torch.from_numpy(img),
                 torch.from_numpy(bstart),
                 torch.tensor([s.answer_start for s in samples], dtype=torch.int64),
                 torch.tensor([s.answer_start if s.answer_from is None else s.answer_from
                               for s in samples], dtype=torch.int64),
                 pack_images(samples, N), [s.task for s in samples])


def plan_microbatches(lengths, max_tokens, pad_multiple):
    """Groups sample indices (sorted by length) into micro-batches whose padded size B*N stays
    within max_tokens; returns a list of index lists."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups, cur = [], []
    for i in order:
        n = -(-lengths[i] // pad_multiple) * pad_multiple
        if cur and (len(cur) + 1) * n > max_tokens:
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    return groups
