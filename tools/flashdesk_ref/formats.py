"""Narrow number formats in numpy: decode tables and encoders for BF16, FP8 E4M3, E8M0, FP4 E2M1.

Used by the safetensors reader/writer and the random-checkpoint writer; no torch. Rounding rules
are those of docs/numerics.md (round to nearest, ties to even; E4M3 saturates at ±448).
"""
import numpy as np


def _e4m3_table():
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes >> 7, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    mant = (codes & 0x7).astype(np.float64)
    normal = (1.0 + mant / 8.0) * np.exp2(exp.astype(np.float64) - 7.0)
    subnormal = mant / 8.0 * 2.0 ** -6
    value = sign * np.where(exp == 0, subnormal, normal)
    value[(exp == 0xF) & ((codes & 0x7) == 0x7)] = np.nan  # 0x7F and 0xFF
    return value.astype(np.float32)


E4M3_TABLE = _e4m3_table()                         # [256] float32, code -> value
E2M1_TABLE = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
                      dtype=np.float32)             # [16] code -> value


def e8m0_to_f32(codes):
    """E8M0 codes (uint8) -> float32 powers of two 2^(code-127); 255 is NaN."""
    codes = np.asarray(codes, dtype=np.int32)
    out = np.ldexp(np.float32(1.0), codes - 127).astype(np.float32)
    return np.where(codes == 255, np.float32(np.nan), out)


def bf16_bits_to_f32(bits):
    """BF16 bit patterns (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> nearest BF16 bit pattern (ties to even), NaN kept NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)


def f32_to_e4m3_codes(x):
    """float32 -> E4M3 codes, round to nearest even, saturating at ±448 (NaN not expected)."""
    x = np.asarray(x, dtype=np.float32)
    positive = E4M3_TABLE[:0x7F]                   # codes 0..126, increasing values 0..448
    mag = np.minimum(np.abs(x), np.float32(448.0))
    hi = np.clip(np.searchsorted(positive, mag, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo = mag - positive[lo]
    d_hi = positive[hi] - mag
    # ties: the even code (codes are consecutive so the even one has an even mantissa)
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def f32_to_e2m1_codes(x):
    """float32 -> E2M1 codes (bit 3 = sign), ties to the even code, saturating at ±6."""
    a = np.abs(np.asarray(x, dtype=np.float32))
    # upper bounds of codes 0..6 with the tie going to the even code
    code = np.full(a.shape, 7, dtype=np.uint8)
    bounds = [(0.25, True), (0.75, False), (1.25, True), (1.75, False),
              (2.5, True), (3.5, False), (5.0, True)]
    for c in range(6, -1, -1):
        bound, inclusive = bounds[c]
        below = a <= bound if inclusive else a < bound
        code = np.where(below, c, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 8, 0).astype(np.uint8)


def pack_e2m1(codes):
    """[..., 2n] E2M1 codes -> [..., n] bytes, low nibble = even column."""
    codes = np.asarray(codes, dtype=np.uint8)
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_e2m1(packed):
    """[..., n] bytes -> [..., 2n] float32 values (low nibble = even column)."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.float32)
    out[..., 0::2] = E2M1_TABLE[packed & 0xF]
    out[..., 1::2] = E2M1_TABLE[packed >> 4]
    return out


def e8m0_ceil_code(v):
    """E8M0 code of 2^ceil(log2 v) for positive normal float32 v, on the FP32 bits."""
    u = np.asarray(v, dtype=np.float32).view(np.uint32)
    return (((u >> 23) & 0xFF) + ((u & 0x7FFFFF) != 0)).astype(np.uint8)
