"""Rounding and block quantisers of docs/numerics.md on float32 torch tensors.

No float8 dtypes are used (torch 1.13 has none): every format is emulated with float ops and
int32/int64 bit manipulation, and every function returns the *dequantised* value as float32
("fake quant"), which is exact in BF16. Each quantiser has a straight-through variant (`*_ste`)
for quantisation-aware training: forward = quantised value, backward = identity.
"""
import torch

F32 = torch.float32
_INV_448 = torch.tensor(1.0 / 448.0, dtype=F32)   # fp32(1/448): the reference multiplies by it
_INV_6 = torch.tensor(1.0 / 6.0, dtype=F32)


def _bits(x):
    """int32 view of the float32 bit pattern. Integer adds below never overflow for finite
    inputs (|bits| stays below 2^31 - 2^23), so signed arithmetic equals the unsigned one."""
    return x.to(F32).contiguous().view(torch.int32)


def _from_bits(u):
    return u.view(F32)


def bf16(x):
    """Round float32 to the nearest BF16 (ties to even), kept as float32 (finite inputs)."""
    u = _bits(x)
    return _from_bits((u + (0x7FFF + ((u >> 16) & 1))) & -0x10000)


def e4m3(x):
    """Round float32 to the nearest E4M3 value (ties to even); |x| is expected <= 448."""
    x = x.to(F32)
    u = _bits(x)
    # normal range: keep 3 of the 23 mantissa bits (round to nearest even on the bits)
    normal = _from_bits((u + (0x7FFFF + ((u >> 20) & 1))) & -0x100000)
    # subnormal range |x| < 2^-6: multiples of 2^-9, torch.round is half-to-even
    sub = torch.round(x * 512.0) / 512.0
    out = torch.where(x.abs() < 2.0 ** -6, sub, normal)
    return out.clamp(-448.0, 448.0)


def e2m1(x):
    """Round float32 to the nearest E2M1 value {0,.5,1,1.5,2,3,4,6} (ties to the even code);
    magnitudes above 6 saturate."""
    a = x.abs()
    v = torch.full_like(a, 6.0)
    for bound, inclusive, value in ((5.0, True, 4.0), (3.5, False, 3.0), (2.5, True, 2.0),
                                    (1.75, False, 1.5), (1.25, True, 1.0), (0.75, False, 0.5),
                                    (0.25, True, 0.0)):
        below = a <= bound if inclusive else a < bound
        v = torch.where(below, torch.full_like(a, value), v)
    return torch.where(x < 0, -v, v)


def pow2_ceil(v):
    """2^ceil(log2 v) for positive normal float32 v, computed on the FP32 bits (exponent + 1
    when the mantissa is non-zero): the E8M0 scale of the reference."""
    u = _bits(v)
    e = (u >> 23) + ((u & 0x7FFFFF) != 0).to(torch.int32)
    return _from_bits(e << 23)


def _blocks(x, block):
    if x.shape[-1] % block:
        raise ValueError(f"last dim {x.shape[-1]} is not a multiple of the block {block}")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def act_quant(x, block=32):
    """FP8 E4M3 with one UE8M0 scale per `block` values along the last dim (activations,
    window KV): amax floored at 1e-4, s = pow2_ceil(amax * fp32(1/448))."""
    xb = _blocks(x.to(F32), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    s = pow2_ceil(amax * _INV_448)
    q = e4m3((xb / s).clamp(-448.0, 448.0))
    return (q * s).reshape(x.shape)


def fp4_e8m0(x, block=32):
    """FP4 E2M1 with a power-of-two E8M0 scale per block (index keys/queries, expert weights)."""
    xb = _blocks(x.to(F32), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(6.0 * 2.0 ** -126)
    s = pow2_ceil(amax * _INV_6)
    q = e2m1((xb / s).clamp(-6.0, 6.0))
    return (q * s).reshape(x.shape)


def fp4_e4m3(x, block=16):
    """FP4 E2M1 with an E4M3 scale per block of 16 (compressed main KV): s = e4m3(amax / 6)."""
    xb = _blocks(x.to(F32), block)
    amax = xb.abs().amax(-1, keepdim=True).clamp_min(6.0 * 2.0 ** -9)
    s = e4m3(amax / 6.0)
    q = e2m1((xb / s).clamp(-6.0, 6.0))
    return (q * s).reshape(x.shape)


def ste(fn):
    """Straight-through variant of a rounding function: value fn(x), gradient of identity."""
    def wrapped(x, *args, **kwargs):
        return x + (fn(x, *args, **kwargs) - x).detach()
    wrapped.__name__ = fn.__name__ + "_ste"
    return wrapped


bf16_ste = ste(bf16)
act_quant_ste = ste(act_quant)
fp4_e8m0_ste = ste(fp4_e8m0)
fp4_e4m3_ste = ste(fp4_e4m3)
