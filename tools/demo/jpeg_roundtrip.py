"""A JPEG round trip in numpy (style_share's "jpeg" style, issue 21): the lossy steps of baseline
JPEG as tools/demo/jpeg.py writes it, then decoded. RGB -> YCbCr (JFIF), the picture padded to whole
16 x 16 MCUs by edge replication, 4:2:0 chroma (2 x 2 average), level shift, 8 x 8 DCT-II,
quantisation with the standard tables (ITU T.81 Annex K) at an IJG quality, dequantisation, inverse
DCT, each plane rounded and clipped to 8 bits, chroma upsampled with the "fancy" triangle filter
(libjpeg's h2v2 default: 3/4 of the nearer chroma sample, 1/4 of the next, in each direction, edges
repeated), YCbCr -> RGB, rounded and clipped to uint8, cropped back to the picture.

It simulates the quantisation loss (the blocking, ringing and chroma smearing a JPEG file carries),
in floating point; it is not libjpeg-turbo's exact integer IDCT or upsampler, so a picture written
with jpeg.py and read by the engine may differ from this by a level or so. No entropy coding: that
step is lossless. The tables, the quality scaling and the forward DCT are jpeg.py's."""

import numpy as np

from demo.jpeg import _C, _CHROMA_Q, _LUMA_Q, _blocks, _scaled_q, ycbcr_420


def _unblocks(coefs):
    """Inverse of jpeg._blocks: DCT blocks [rows, cols, 8, 8] -> level-shifted-back plane [H, W]."""
    b = _C.T @ coefs @ _C + 128.0
    rows, cols = b.shape[:2]
    return b.transpose(0, 2, 1, 3).reshape(rows * 8, cols * 8)


def _lossy(plane, table):
    """A plane [H, W] (multiples of 8) through DCT, quantisation and back, as 8-bit samples."""
    q = _blocks(plane) / table
    return np.clip(np.rint(_unblocks(np.rint(q) * table)), 0, 255)


def _fancy_up(plane):
    """[h, w] -> [2h, 2w]: libjpeg's triangle ("fancy") h2v2 upsampling, in floating point."""
    for axis in (0, 1):
        n = plane.shape[axis]
        prev = np.take(plane, np.r_[0, np.arange(n - 1)], axis=axis)
        nxt = np.take(plane, np.r_[np.arange(1, n), n - 1], axis=axis)
        out = np.stack([0.75 * plane + 0.25 * prev, 0.75 * plane + 0.25 * nxt], axis=axis + 1)
        shape = list(plane.shape)
        shape[axis] = 2 * n
        plane = out.reshape(shape)
    return plane


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
    y = _lossy(y, ql)
    cb, cr = _fancy_up(_lossy(cb, qc)) - 128.0, _fancy_up(_lossy(cr, qc)) - 128.0
    out = np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb], axis=-1)
    return np.clip(np.rint(out[:h, :w]), 0, 255).astype(np.uint8)
