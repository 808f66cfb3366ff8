"""Minimal baseline JPEG writer (numpy only) for the sealed test set's pictures (sealed_test.py):
JFIF, 8-bit YCbCr, 4:2:0 chroma subsampling as cameras and most encoders write it, the standard
quantisation tables (ITU T.81 Annex K) scaled to a quality, the standard Huffman tables. There is
no JPEG encoder among the Python packages this machine has; the engine reads these files with
libjpeg-turbo, as it reads any JPEG a user drops."""

import struct

import numpy as np

# ITU T.81 Annex K.1: luminance and chrominance quantisation tables, natural (row-major) order.
_LUMA_Q = np.array([
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]).reshape(8, 8)
_CHROMA_Q = np.array([
    17, 18, 24, 47, 99, 99, 99, 99, 18, 21, 26, 66, 99, 99, 99, 99,
    24, 26, 56, 99, 99, 99, 99, 99, 47, 66, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99,
    99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99, 99]).reshape(8, 8)

# Zigzag order: position i of the scan is coefficient _ZIGZAG[i] of the row-major block.
# Odd diagonals run down-left (row ascending), even ones up-right (column ascending).
_ZIGZAG = np.array(sorted(range(64), key=lambda p: (p // 8 + p % 8,
                                                    (p // 8) if (p // 8 + p % 8) % 2 else (p % 8))))

# ITU T.81 Annex K.3: the standard Huffman tables as (code lengths 1..16, symbols).
_DC_LUMA = ([0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0], list(range(12)))
_DC_CHROMA = ([0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], list(range(12)))
_AC_LUMA = ([0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7D], bytes.fromhex(
    "01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25"
    "262728292a3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a83"
    "8485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3"
    "d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9fa"))
_AC_CHROMA = ([0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77], bytes.fromhex(
    "000102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718"
    "191a262728292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82"
    "838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3"
    "d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9fa"))


def _codes(table):
    """symbol -> (code, length) of a canonical Huffman table (T.81 Annex C)."""
    lengths, symbols = table
    out, code, k = {}, 0, 0
    for length in range(1, 17):
        for _ in range(lengths[length - 1]):
            out[symbols[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return out


def _scaled_q(base, quality):
    """A quantisation table at quality 1..100 (the IJG scaling)."""
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return np.clip((base * scale + 50) // 100, 1, 255)


# The 8-point DCT-II as a matrix: block -> C @ block @ C.T.
_C = np.array([[(np.sqrt(0.5) if u == 0 else 1.0) * np.cos((2 * x + 1) * u * np.pi / 16) / 2
                for x in range(8)] for u in range(8)])


def _blocks(plane):
    """[H, W] (multiples of 8) -> quantisation-ready DCT blocks [rows, cols, 8, 8]."""
    h, w = plane.shape
    b = plane.reshape(h // 8, 8, w // 8, 8).transpose(0, 2, 1, 3) - 128.0
    return _C @ b @ _C.T


class _Bits:
    def __init__(self):
        self.out, self.acc, self.n = bytearray(), 0, 0

    def put(self, code, length):
        self.acc = (self.acc << length) | code
        self.n += length
        while self.n >= 8:
            self.n -= 8
            byte = (self.acc >> self.n) & 0xFF
            self.out.append(byte)
            if byte == 0xFF:
                self.out.append(0)  # byte stuffing
        self.acc &= (1 << self.n) - 1

    def flush(self):
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)  # pad with ones
        return bytes(self.out)


def _magnitude(v):
    """(category, bits) of a coefficient (T.81 F.1.2.1)."""
    a = abs(v)
    size = a.bit_length()
    return size, (v if v >= 0 else v + (1 << size) - 1)


def _encode_block(bits, zz, prev_dc, dc_codes, ac_codes):
    size, value = _magnitude(int(zz[0]) - prev_dc)
    bits.put(*dc_codes[size])
    if size:
        bits.put(value, size)
    nonzero = np.flatnonzero(zz[1:]) + 1
    last = 0
    for k in nonzero:
        run = k - last - 1
        while run > 15:
            bits.put(*ac_codes[0xF0])  # ZRL: 16 zeros
            run -= 16
        size, value = _magnitude(int(zz[k]))
        bits.put(*ac_codes[(run << 4) | size])
        bits.put(value, size)
        last = k
    if last != 63:
        bits.put(*ac_codes[0x00])  # EOB
    return int(zz[0])


def ycbcr_420(rgb):
    """JFIF's YCbCr of uint8 [H, W, 3] padded by edge replication to whole 16 x 16 MCUs, the chroma
    averaged over 2 x 2 pixels (4:2:0): float64 y [ph, pw], cb and cr [ph / 2, pw / 2]."""
    h, w, _ = rgb.shape
    ph, pw = -(-h // 16) * 16, -(-w // 16) * 16
    x = np.pad(rgb.astype(np.float64), ((0, ph - h), (0, pw - w), (0, 0)), mode="edge")
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    cb = -0.168736 * r - 0.331264 * g + 0.5 * b + 128.0
    cr = 0.5 * r - 0.418688 * g - 0.081312 * b + 128.0
    cb = cb.reshape(ph // 2, 2, pw // 2, 2).mean(axis=(1, 3))
    cr = cr.reshape(ph // 2, 2, pw // 2, 2).mean(axis=(1, 3))
    return y, cb, cr


def encode_jpeg(rgb, quality=90):
    """Baseline JPEG bytes of a uint8 array [H, W, 3]; deterministic."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"encode_jpeg needs [H, W, 3] uint8, got shape {rgb.shape}")
    if not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be 1..100, not {quality}")
    h, w, _ = rgb.shape
    if not (1 <= h <= 65535 and 1 <= w <= 65535):
        raise ValueError(f"JPEG sides must be 1..65535 pixels, got {w} x {h}")
    y, cb, cr = ycbcr_420(rgb)
    ph, pw = y.shape
    ql, qc = _scaled_q(_LUMA_Q, quality), _scaled_q(_CHROMA_Q, quality)
    planes = [np.rint(_blocks(y) / ql).astype(np.int64), np.rint(_blocks(cb) / qc).astype(np.int64),
              np.rint(_blocks(cr) / qc).astype(np.int64)]
    zz = [p.reshape(p.shape[0], p.shape[1], 64)[..., _ZIGZAG] for p in planes]
    dc = [_codes(_DC_LUMA), _codes(_DC_CHROMA)]
    ac = [_codes(_AC_LUMA), _codes(_AC_CHROMA)]
    bits, prev = _Bits(), [0, 0, 0]
    for my in range(ph // 16):
        for mx in range(pw // 16):
            for by in range(2):  # four luminance blocks, then one Cb and one Cr
                for bx in range(2):
                    prev[0] = _encode_block(bits, zz[0][2 * my + by, 2 * mx + bx], prev[0], dc[0], ac[0])
            for c in (1, 2):
                prev[c] = _encode_block(bits, zz[c][my, mx], prev[c], dc[1], ac[1])
    scan = bits.flush()

    def segment(marker, body):
        return marker + struct.pack(">H", len(body) + 2) + body

    out = b"\xff\xd8"
    out += segment(b"\xff\xe0", b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
    out += segment(b"\xff\xdb", bytes([0]) + bytes(int(v) for v in ql.reshape(64)[_ZIGZAG]))
    out += segment(b"\xff\xdb", bytes([1]) + bytes(int(v) for v in qc.reshape(64)[_ZIGZAG]))
    out += segment(b"\xff\xc0", struct.pack(">BHHB", 8, h, w, 3) + bytes([1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]))
    for class_id, (lengths, symbols) in ((0x00, _DC_LUMA), (0x10, _AC_LUMA), (0x01, _DC_CHROMA),
                                         (0x11, _AC_CHROMA)):
        out += segment(b"\xff\xc4", bytes([class_id]) + bytes(lengths) + bytes(symbols))
    out += segment(b"\xff\xda", bytes([3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0]))
    return out + scan + b"\xff\xd9"


def write_jpeg(path, rgb, quality=90):
    with open(path, "wb") as f:
        f.write(encode_jpeg(rgb, quality))
