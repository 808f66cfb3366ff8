"""Rotary position tables and rotations: the text model's interleaved partial RoPE (pairs
(2i, 2i+1) of the last r dims, YaRN on compressed layers) and the ViT's 2D rotate-half RoPE.

Angles are FP32 products position * frequency, cos/sin in FP32, rotation in FP32, result bf16
(docs/numerics.md). Tables are cached per (base, yarn, length, device).
"""
import functools
import math

import torch

F32 = torch.float32


def text_frequencies(rope_dim, base, yarn=None):
    """[rope_dim/2] FP32 frequencies base^(-2i/r), YaRN-corrected when `yarn` (the config's
    rope_scaling dict) is given (docs/model-spec.md §3.1)."""
    freqs = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=F32) / rope_dim))
    if yarn is None:
        return freqs
    orig, factor = yarn["original_max_position_embeddings"], yarn["factor"]

    def correction_dim(rotations):
        return rope_dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(yarn["beta_fast"])), 0)
    high = min(math.ceil(correction_dim(yarn["beta_slow"])), rope_dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rope_dim // 2, dtype=F32) - low) / (high - low), 0, 1)
    smooth = 1 - ramp
    return freqs / factor * (1 - smooth) + freqs * smooth


class RopeTables:
    """cos/sin [n, r/2] for positions 0..n-1 of the window-only layers (rope_theta, no YaRN) and
    the compressed layers (compress_rope_theta with YaRN)."""

    def __init__(self, cfg):
        r = cfg.qk_rope_head_dim
        self.freqs = {
            False: text_frequencies(r, cfg.rope_theta),
            True: text_frequencies(r, cfg.compress_rope_theta, cfg.rope_scaling),
        }
        self._cache = {}

    def get(self, compressed, n, device):
        key = (bool(compressed), n, str(device))
        if key not in self._cache:
            pos = torch.arange(n, dtype=F32)
            ang = torch.outer(pos, self.freqs[bool(compressed)])
            self._cache[key] = (torch.cos(ang).to(device), torch.sin(ang).to(device))
        return self._cache[key]


def apply_rope(num, x, cos, sin, inverse=False):
    """Rotates pairs (2i, 2i+1) of the last 2*cos.shape[-1] dims of x by the angles (conjugate
    when `inverse`); cos/sin broadcast against x[..., :r/2]. Returns x's other dims unchanged and
    the rotated tail rounded to bf16 (num.rb)."""
    r = cos.shape[-1] * 2
    d = x.shape[-1]
    tail = x[..., d - r:].to(F32)
    a, b = tail[..., 0::2], tail[..., 1::2]
    if inverse:
        sin = -sin
    rot = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    return torch.cat((x[..., :d - r], num.rb(rot).to(x.dtype)), dim=-1)


def vision_tables(head_dim, theta, n_h, n_w, device):
    """cos/sin [n_h*n_w, head_dim/2] of the ViT's 2D RoPE for one n_h x n_w grid, row-major."""
    rows = torch.arange(n_h, dtype=F32).repeat_interleave(n_w)
    cols = torch.arange(n_w, dtype=F32).repeat(n_h)
    cos, sin = vision_tables_at(head_dim, theta, torch.stack((rows, cols), -1))
    return cos.to(device), sin.to(device)


def vision_tables_at(head_dim, theta, rc):
    """cos/sin [..., head_dim/2] of the ViT's 2D RoPE at patch positions rc [..., 2] (FP32 row,
    col), on rc's device: per patch the phases [row * inv_freq, col * inv_freq] with
    inv_freq = theta^(-2i/(head_dim/2))."""
    inv = _vision_inv_freq(head_dim, float(theta), str(rc.device))
    phase = torch.cat((rc[..., :1] * inv, rc[..., 1:] * inv), dim=-1)
    return torch.cos(phase), torch.sin(phase)


@functools.lru_cache(maxsize=None)
def _vision_inv_freq(head_dim, theta, device):
    """[head_dim/4] FP32 theta^(-2i/(head_dim/2)), computed on the CPU as before and copied once
    per device: a copy from pageable memory is a host sync, which every vision call made."""
    axis = head_dim // 2
    return (1.0 / (theta ** (torch.arange(0, axis, 2, dtype=F32) / axis))).to(device)


def apply_rope_half(x, cos, sin):
    """Rotate-half RoPE over the whole head in FP32: [x1 cos - x2 sin, x2 cos + x1 sin]."""
    xf = x.to(F32)
    h = xf.shape[-1] // 2
    x1, x2 = xf[..., :h], xf[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
