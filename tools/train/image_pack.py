"""The pictures of a batch packed into a few padded sets (one per band of patch counts), with
the indices that place their patches, aligner cells and span vectors built on the host, so the
vision tower, the aligner and the span writes run at most len(PATCH_BANDS) + 1 times per
micro-batch whatever mix of grids it holds.

Why: with pictures of many sizes (configs/flash-tiny-sizes.json) a 64 K-token micro-batch holds
30-35 distinct ViT grids. One tower call per grid cost ~1,400 aten ops (forward + backward) each,
~137 K per step against ~4 K with one grid, and four host syncs each (tables and indices copied
from pageable memory). One pack for all would pad every picture to the largest (1.3-1.8x the
patches, 1.6-2.9x the attention scores); the bands keep that to 1.1-1.2x and 1.2-1.4x.

Layout: picture m's patches are rows 0..vit_h*vit_w-1 of pixels[m] (row-major), zero beyond.
The aligner reads a zero grid of grid_h x grid_w patches per picture (the largest vit_h and
vit_w) with each picture's patches at their (row, col), so the cells a picture uses see the same
zero padding bottom/right as its own grid would (docs/model-spec.md §8).
"""
from dataclasses import dataclass, fields

import numpy as np
import torch


# Upper bounds of the bands of patch counts (vit_h * vit_w): 12x12-14x14 (4x4 and 5x5 LLM cells
# when square), up to 18x18, the rest (the 64-token budget ends near 21x21 = 441).
PATCH_BANDS = (196, 324)


@dataclass
class ImagePack:
    pixels: torch.Tensor       # [n, P, 3*p*p] float32 normalised patches, zero past a picture's own
    key_valid: torch.Tensor    # [n, P] bool: real patches (the attention keys)
    patch_rc: torch.Tensor     # [n, P, 2] float32 (row, col) of each patch (RoPE), 0 for padding
    patch_src: torch.Tensor    # [n_real] int64 flat index into [n*P] of each real patch
    patch_dst: torch.Tensor    # [n_real] int64 its flat index into the [n, grid_h, grid_w] grid
    cell_irc: torch.Tensor     # [cells, 3] int64 (picture, cell row, cell col), span order
    cell_pos: torch.Tensor     # [cells] int64 flat batch position (row * N + column) of each cell
    newline_pos: torch.Tensor  # [sum llm_h] int64 flat positions of IMAGE_NEW_LINE
    start_pos: torch.Tensor    # [n] int64 flat positions of IMAGE_START
    end_pos: torch.Tensor      # [n] int64 flat positions of IMAGE_END
    grid_h: int
    grid_w: int

    def to(self, device):
        """Non-blocking copies: from pageable memory CUDA stages them at once, so no stream sync."""
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        for k, v in moved.items():
            if torch.is_tensor(v):
                moved[k] = v.to(device, non_blocking=True)
        return ImagePack(**moved)


def pack_images(samples, N, bands=PATCH_BANDS):
    """The pictures of `samples` (batch rows, padded to N positions) as ImagePacks, one per
    non-empty band of patch counts (bounds `bands`, the last band open)."""
    items = [(row, im) for row, s in enumerate(samples) for im in s.images]
    band = lambda im: sum(im.vit_h * im.vit_w > b for b in bands)
    return [_pack([it for it in items if band(it[1]) == k], N) for k in range(len(bands) + 1)
            if any(band(im) == k for _, im in items)]


def _pack(items, N):
    """[(batch row, SampleImage)] -> one ImagePack."""
    n = len(items)
    P = max(im.vit_h * im.vit_w for _, im in items)
    gh, gw = max(im.vit_h for _, im in items), max(im.vit_w for _, im in items)
    pixels = np.zeros((n, P, items[0][1].pixels.shape[1]), np.float32)
    valid = np.zeros((n, P), bool)
    rc = np.zeros((n, P, 2), np.float32)
    src, dst, cells, cell_pos, nl_pos, start_pos, end_pos = [], [], [], [], [], [], []
    for m, (row, im) in enumerate(items):
        k = im.vit_h * im.vit_w
        pixels[m, :k] = im.pixels
        valid[m, :k] = True
        r, c = np.divmod(np.arange(k), im.vit_w)
        rc[m, :k, 0], rc[m, :k, 1] = r, c
        src.append(m * P + np.arange(k))
        dst.append((m * gh + r) * gw + c)
        base = row * N + im.start
        ci, cj = np.divmod(np.arange(im.llm_h * im.llm_w), im.llm_w)
        cells.append(np.stack((np.full_like(ci, m), ci, cj), 1))
        cell_pos.append(base + 1 + ci * (im.llm_w + 1) + cj)
        nl_pos.append(base + 1 + np.arange(im.llm_h) * (im.llm_w + 1) + im.llm_w)
        start_pos.append(base)
        end_pos.append(base + im.llm_h * (im.llm_w + 1) + 1)
    cat = lambda parts: torch.from_numpy(np.concatenate(parts).astype(np.int64))
    return ImagePack(torch.from_numpy(pixels), torch.from_numpy(valid), torch.from_numpy(rc),
                     cat(src), cat(dst), cat(cells), cat(cell_pos), cat(nl_pos),
                     torch.tensor(start_pos, dtype=torch.int64),
                     torch.tensor(end_pos, dtype=torch.int64), gh, gw)
