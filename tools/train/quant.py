"""The block quantisers of docs/numerics.md as fake-quant torch functions for training, with
straight-through gradients.

Every function returns the dequantised value (exact in BF16), computed in FP32 with int32 bit
tricks that run on any device (no float8 dtypes: torch 1.13 has none). The rounding rules are the
engine's (engine/util/quant.h): scales from the FP32 bit pattern of amax times the FP32
reciprocal, E4M3 and E2M1 round to nearest with ties to even, E4M3 saturating at ±448.
Straight-through variants (`*_ste`) return the quantised value and pass the gradient unchanged.
"""
import torch

F32 = torch.float32
INV_448 = 1.0 / 448.0  # Python float; multiplied into an FP32 tensor it is rounded to fp32(1/448)
INV_6 = 1.0 / 6.0


def _f32(x):
    return x.to(F32).contiguous()


def pow2_ceil(v):
    """2^ceil(log2 v) for positive normal FP32 v, on the bits: adding 0x7FFFFF carries into the
    exponent exactly when the mantissa is non-zero (the E8M0 scale rule)."""
    bits = _f32(v).view(torch.int32)
    return ((bits + 0x7FFFFF) & 0x7F800000).view(F32)


def round_e4m3(x):
    """Nearest E4M3 value (ties to even) of FP32 x with |x| <= 448."""
    x = _f32(x)
    bits = x.view(torch.int32)
    normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -(1 << 20)).view(F32)  # keep 3 mantissa bits
    sub = torch.round(x * 512.0) * (1.0 / 512.0)  # |x| < 2^-6: multiples of 2^-9, half to even
    return torch.where(x.abs() < 2.0 ** -6, sub, normal)


def round_e2m1(x):
    """Nearest E2M1 value {0,.5,1,1.5,2,3,4,6} of FP32 x (ties to the even code), saturating.
    On each binade the grid is uniform and the even code is the even multiple, so round-half-even
    of the scaled value is the tie rule: steps 0.5 below 2, 1 below 4, 2 up to 6."""
    a = x.abs()
    step = torch.where(a < 2.0, torch.full_like(a, 0.5),
                       torch.where(a < 4.0, torch.ones_like(a), torch.full_like(a, 2.0)))
    q = (torch.round(a / step) * step).clamp_max(6.0)
    return torch.copysign(q, x)


def _blocks(x, block):
    if x.shape[-1] % block:
        raise ValueError(f"last dim {x.shape[-1]} is not a multiple of the block {block}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def act_quant(x, block=32):
    """FP8 E4M3 per `block` values along the last dim with a UE8M0 scale (activations, window KV):
    amax floored at 1e-4, s = pow2_ceil(amax * fp32(1/448)), q = e4m3(clamp(x / s, ±448))."""
    xb = _blocks(_f32(x), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    s = pow2_ceil(amax * INV_448)
    return (round_e4m3((xb / s).clamp(-448.0, 448.0)) * s).reshape(x.shape)


def fp4_e8m0(x, block=32):
    """FP4 E2M1 per block with a power-of-two E8M0 scale (index queries/keys, expert weights):
    amax floored at 6*2^-126, s = pow2_ceil(amax * fp32(1/6)), q = e2m1(clamp(x / s, ±6))."""
    xb = _blocks(_f32(x), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(6.0 * 2.0 ** -126)
    s = pow2_ceil(amax * INV_6)
    return (round_e2m1((xb / s).clamp(-6.0, 6.0)) * s).reshape(x.shape)


def fp4_e4m3(x, block=16):
    """FP4 E2M1 per block of 16 with an E4M3 scale (compressed main KV): amax floored at 6*2^-9,
    s = e4m3(amax / 6) (FP32 division), q = e2m1(clamp(x / s, ±6)) with an FP32 division."""
    xb = _blocks(_f32(x), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(6.0 * 2.0 ** -9)
    s = round_e4m3((amax / 6.0).clamp_max(448.0))
    return (round_e2m1((xb / s).clamp(-6.0, 6.0)) * s).reshape(x.shape)


def fp8_weight(w, block=32):
    """FP8 E4M3 weight [out, in] with one UE8M0 scale per block x block tile (dense linears); the
    same rule as act_quant over each tile. out and in must be multiples of `block`."""
    o, i = w.shape
    if o % block or i % block:
        raise ValueError(f"weight {tuple(w.shape)} is not a multiple of {block}x{block} tiles")
    tiles = _f32(w).reshape(o // block, block, i // block, block).transpose(1, 2)
    amax = tiles.abs().amax((-1, -2), keepdim=True).clamp_min(1e-4)
    s = pow2_ceil(amax * INV_448)
    q = round_e4m3((tiles / s).clamp(-448.0, 448.0)) * s
    return q.transpose(1, 2).reshape(o, i)


def fp4_weight(w, block=32):
    """Routed-expert weight [..., out, in]: FP4 E2M1 with an E8M0 scale per `block` inputs."""
    return fp4_e8m0(w, block)


def fp8_weight_scale_codes(w, block=32):
    """(E4M3 values / scale, E8M0 scale codes) of fp8_weight for the exporter: values in
    [-448, 448] per element and uint8-range codes [out/block, in/block]."""
    o, i = w.shape
    tiles = _f32(w).reshape(o // block, block, i // block, block).transpose(1, 2)
    amax = tiles.abs().amax((-1, -2), keepdim=True).clamp_min(1e-4)
    s = pow2_ceil(amax * INV_448)
    q = round_e4m3((tiles / s).clamp(-448.0, 448.0))
    codes = (s.view(torch.int32) >> 23).reshape(o // block, i // block)
    return q.transpose(1, 2).reshape(o, i), codes


def fp4_e8m0_scale_codes(x, block=32):
    """(E2M1 values, E8M0 scale codes [..., n/block]) of fp4_e8m0, for the exporter."""
    xb = _blocks(_f32(x), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(6.0 * 2.0 ** -126)
    s = pow2_ceil(amax * INV_6)
    q = round_e2m1((xb / s).clamp(-6.0, 6.0))
    return q.reshape(x.shape), (s.view(torch.int32) >> 23).squeeze(-1)


def act_quant_scale_codes(x, block=32):
    """(E4M3 values, E8M0 scale codes [..., n/block]) of act_quant (Engram table rows)."""
    xb = _blocks(_f32(x), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    s = pow2_ceil(amax * INV_448)
    q = round_e4m3((xb / s).clamp(-448.0, 448.0))
    return q.reshape(x.shape), (s.view(torch.int32) >> 23).squeeze(-1)


class _StraightThrough(torch.autograd.Function):
    """Forward: the quantised value in x's dtype (exact: quantised values fit BF16); backward:
    the identity. Avoids the rounding of x + (q - x).detach() in BF16 arithmetic."""

    @staticmethod
    def forward(ctx, x, fn, *args):
        return fn(x, *args).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return (grad, None) + (None,) * 8


def ste(fn):
    def wrapped(x, *args):
        if not x.requires_grad:
            return fn(x, *args).to(x.dtype)
        return _StraightThrough.apply(x, fn, *args)
    wrapped.__name__ = fn.__name__ + "_ste"
    return wrapped


act_quant_ste = ste(act_quant)
fp4_e8m0_ste = ste(fp4_e8m0)
fp4_e4m3_ste = ste(fp4_e4m3)
fp8_weight_ste = ste(fp8_weight)
fp4_weight_ste = ste(fp4_weight)
