"""A JPEG round trip in numpy (style_share's "jpeg" style, issue 21): the lossy steps of baseline
JPEG as tools/demo/jpeg.py writes it, then decoded as libjpeg-turbo's default decoder does.
RGB -> YCbCr (JFIF), the picture padded to whole 16 x 16 MCUs by edge replication, 4:2:0 chroma
(2 x 2 average), level shift, 8 x 8 DCT-II, quantisation with the standard tables (ITU T.81 Annex K)
at an IJG quality, dequantisation, inverse DCT, each plane rounded (half up, as libjpeg's integer
descaling) and clipped to 8 bits; then the decoder's steps in integers: chroma cut to its own size
(ceil(H/2) x ceil(W/2): the MCU padding is never shown), upsampled with the "fancy" triangle filter
(libjpeg's h2v2 default: 3/4 of the nearer chroma sample, 1/4 of the next, in each direction,
edges repeated, rounded with its alternating biases), YCbCr -> RGB in libjpeg's 16-bit fixed
point, clipped to uint8, cropped to the picture.

The one step left in floating point is the inverse DCT (libjpeg-turbo's is the integer "islow"),
so against djpeg a value differs by a level now and then: at qualities 60-95, mean 0.004-0.024
levels per channel, at most 3, 0.4-1.8% of values differing at all (tools/demo/jpeg_vs_djpeg.py;
with float chroma upsampling and colour conversion, rounding half to even and chroma upsampled
from the MCU padding it was 0.04-0.57, up to 10, 7-23%). No entropy coding: that step is
lossless. The tables, the quality scaling and the forward DCT are jpeg.py's."""

import numpy as np

from demo.jpeg import _C, _CHROMA_Q, _LUMA_Q, _blocks, _scaled_q, ycbcr_420


def _unblocks(coefs):
    """Inverse of jpeg._blocks: DCT blocks [rows, cols, 8, 8] -> level-shifted-back plane [H, W]."""
    b = _C.T @ coefs @ _C + 128.0
    rows, cols = b.shape[:2]
    return b.transpose(0, 2, 1, 3).reshape(rows * 8, cols * 8)


def _lossy(plane, table):
    """A plane [H, W] (multiples of 8) through DCT, quantisation and back, as 8-bit samples. Halves
    round up as libjpeg's descaling does (a flat block often lands on one: rounding it to even
    shifted whole areas by a level); 1e-6 absorbs the float IDCT's error there."""
    q = _blocks(plane) / table
    return np.clip(np.floor(_unblocks(np.rint(q) * table) + 0.5 + 1e-6), 0, 255)


def _fancy_up(plane):
    """int [h, w] -> [2h, 2w]: libjpeg's h2v2 "fancy" upsampling in its integers. Each output row
    sums 3x its own input row and the nearer neighbour row (edges repeated); each output column then
    takes 3x that sum at its own column and 1x at the nearer neighbour column, divided by 16 with
    +8 on even columns and +7 on odd ones (libjpeg's alternating rounding)."""
    plane = plane.astype(np.int64)
    h, w = plane.shape
    up, down = plane[np.r_[0, np.arange(h - 1)]], plane[np.r_[np.arange(1, h), h - 1]]
    rows = np.stack([3 * plane + up, 3 * plane + down], axis=1).reshape(2 * h, w)
    left, right = rows[:, np.r_[0, np.arange(w - 1)]], rows[:, np.r_[np.arange(1, w), w - 1]]
    out = np.stack([(3 * rows + left + 8) >> 4, (3 * rows + right + 7) >> 4], axis=2)
    return out.reshape(2 * h, 2 * w)


_SCALE, _HALF = 16, 1 << 15
_FIX = lambda x: int(x * (1 << _SCALE) + 0.5)


def _ycc_to_rgb(y, cb, cr):
    """libjpeg's YCbCr -> RGB in 16-bit fixed point (int planes, chroma centred on 128): each
    chroma term rounded (green's two summed before rounding), added to Y, clipped to 8 bits."""
    cb, cr = cb - 128, cr - 128
    r = y + ((_FIX(1.40200) * cr + _HALF) >> _SCALE)
    g = y + ((-_FIX(0.34414) * cb - _FIX(0.71414) * cr + _HALF) >> _SCALE)
    b = y + ((_FIX(1.77200) * cb + _HALF) >> _SCALE)
    return np.clip(np.stack([r, g, b], axis=-1), 0, 255).astype(np.uint8)


def roundtrip(rgb, quality):
    """uint8 [H, W, 3] -> the same picture as a baseline 4:2:0 JPEG at `quality` (1..100, IJG
    scaling) would decode: uint8 [H, W, 3], deterministic."""
    rgb = np.asarray(rgb)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"jpeg_roundtrip needs [H, W, 3] uint8, got {rgb.dtype} {rgb.shape}")
    if not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be 1..100, not {quality}")
    h, w, _ = rgb.shape
    y, cb, cr = ycbcr_420(rgb)
    ql, qc = _scaled_q(_LUMA_Q, quality), _scaled_q(_CHROMA_Q, quality)
    ch, cw = -(-h // 2), -(-w // 2)  # the chroma components' own size
    y = _lossy(y, ql).astype(np.int64)[:h, :w]
    cb, cr = (_fancy_up(_lossy(c, qc)[:ch, :cw])[:h, :w] for c in (cb, cr))
    return _ycc_to_rgb(y, cb, cr)
