"""Independent check of the checkpoint format: a random checkpoint written by flashdesk-cli is read
with plain Python + numpy (own safetensors parser, own E4M3/E2M1 tables, own quantisers) and
regenerated from the PRNG documented in docs/checkpoint-format.md, bit for bit."""
import json
import math
import os
import struct
import subprocess
import tempfile
import unittest

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "assets", "configs", "test-every-role.json")
MASK = (1 << 64) - 1


def find_cli():
    candidates = [os.environ.get("FD_CLI_PATH", "")] + [
        os.path.join(ROOT, "build", preset, "bin", "flashdesk-cli")
        for preset in ("release", "engine-only", "debug", "asan-ubsan")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError("flashdesk-cli not built (set FD_CLI_PATH or build a preset)")


# ---- the documented PRNG -------------------------------------------------------------------
def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(text):
    h = 0xCBF29CE484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    return h


def normal_row(seed, name, row, n):
    state = mix((mix(seed ^ fnv1a64(name)) + row) & MASK)
    out = []
    while len(out) < n:
        vals = []
        for _ in range(2):
            state = (state + 0x9E3779B97F4A7C15) & MASK
            vals.append((mix(state) >> 11) * 2.0 ** -53)
        r = math.sqrt(-2.0 * math.log(1.0 - vals[0]))
        out += [r * math.cos(2.0 * math.pi * vals[1]), r * math.sin(2.0 * math.pi * vals[1])]
    return out[:n]


# ---- number formats, written from their definitions ------------------------------------------
def e4m3_values():
    v = np.zeros(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 7
        v[code] = sign * (m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    v[0x7F] = v[0xFF] = np.nan
    return v


E4M3 = e4m3_values()
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def round_to_codes(x, values, codes):
    """Nearest representable value, ties to the even code (codes sorted by value)."""
    out = np.empty(x.shape, dtype=np.uint8)
    for i, v in enumerate(x.ravel()):
        d = np.abs(values - abs(v))
        best = np.flatnonzero(d == d.min())
        c = codes[best[0]] if len(best) == 1 else [codes[b] for b in best if codes[b] % 2 == 0][0]
        out.ravel()[i] = c | (sign_bit(codes) if v < 0 else 0)
    return out


def sign_bit(codes):
    return 0x80 if len(codes) > 8 else 0x8


POS_E4M3_CODES = list(range(0x7F))          # 0 .. 448
POS_E4M3_VALUES = E4M3[:0x7F]
POS_E2M1_CODES = list(range(8))
POS_E2M1_VALUES = E2M1[:8]


def e8m0_ceil(v):
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return ((bits >> 23) & 0xFF) + (1 if bits & 0x7FFFFF else 0)


def quant_fp8_block(x):
    amax = max(float(np.max(np.abs(x))), 1e-4)
    code = e8m0_ceil(np.float32(np.float32(amax) / np.float32(448.0)))
    scale = 2.0 ** (code - 127)
    q = np.clip(x.astype(np.float32) / np.float32(scale), -448, 448)
    return round_to_codes(q, POS_E4M3_VALUES, POS_E4M3_CODES), code


def bf16_bits(x32):
    u = x32.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# ---- safetensors, read by hand ---------------------------------------------------------------
def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        tensors[name] = (t["dtype"], t["shape"], blob[8 + n + b:8 + n + e])
    return meta, tensors, 8 + n


class CheckpointFormatTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        subprocess.run([find_cli(), "make-random", "--config", CONFIG, "--out", cls.dir,
                        "--seed", "5"], check=True, stdout=subprocess.DEVNULL)
        cls.meta, cls.t, cls.data_start = read_safetensors(os.path.join(cls.dir, "model.safetensors"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_header_conventions(self):
        self.assertEqual(self.data_start % 8, 0)
        self.assertEqual(self.meta["format"], "pt")
        dtype_size = {"F8_E4M3": 1, "F8_E8M0": 1, "I8": 1, "BF16": 2, "F32": 4, "I64": 8}
        for name, (dtype, shape, raw) in self.t.items():
            self.assertEqual(len(raw), int(np.prod(shape)) * dtype_size[dtype], name)

    def test_bf16_norm_weight_bit_exact(self):
        dtype, shape, raw = self.t["layers.3.attn.kv_norm.weight"]
        self.assertEqual((dtype, shape), ("BF16", [128]))
        z = np.array(normal_row(5, "layers.3.attn.kv_norm.weight", 0, 128))
        want = bf16_bits((1.0 + 0.02 * z).astype(np.float32))
        np.testing.assert_array_equal(np.frombuffer(raw, dtype=np.uint16), want)

    def test_fp8_weight_codes_and_scales_bit_exact(self):
        name = "layers.2.attn.wq_a"
        _, shape, raw = self.t[name + ".weight"]
        _, sshape, sraw = self.t[name + ".scale"]
        self.assertEqual(shape, [128, 256])
        self.assertEqual(sshape, [4, 8])
        codes = np.frombuffer(raw, dtype=np.uint8).reshape(128, 256)
        scales = np.frombuffer(sraw, dtype=np.uint8).reshape(4, 8)
        std = 1.0 / math.sqrt(256)
        rows = np.array([normal_row(5, name + ".weight", r, 256) for r in range(32)])
        x = (std * rows).astype(np.float32)
        for tc in range(8):
            q, code = quant_fp8_block(x[:, tc * 32:(tc + 1) * 32])
            self.assertEqual(scales[0, tc], code)
            np.testing.assert_array_equal(codes[:32, tc * 32:(tc + 1) * 32], q)

    def test_fp4_expert_dequantises_near_its_draw(self):
        name = "layers.4.ffn.experts.2.w1"
        _, shape, raw = self.t[name + ".weight"]
        _, sshape, sraw = self.t[name + ".scale"]
        self.assertEqual((shape, sshape), ([64, 128], [64, 8]))
        packed = np.frombuffer(raw, dtype=np.uint8).reshape(64, 128)
        vals = np.empty((64, 256))
        vals[:, 0::2] = E2M1[packed & 0xF]   # low nibble = even column
        vals[:, 1::2] = E2M1[packed >> 4]
        scale = 2.0 ** (np.frombuffer(sraw, dtype=np.uint8).reshape(64, 8).astype(np.float64) - 127)
        w = vals * np.repeat(scale, 32, axis=1)
        draw = np.array([normal_row(5, name + ".weight", r, 256) for r in range(64)]) / 16.0
        # FP4 with a power-of-two scale: error at most half a step of the top binade (1 x scale).
        self.assertTrue(np.all(np.abs(w - draw) <= np.repeat(scale, 32, axis=1) + 1e-12))
        self.assertLess(np.sqrt(np.mean((w - draw) ** 2)) / np.sqrt(np.mean(draw ** 2)), 0.2)

    def test_engram_token_map(self):
        _, tensors, _ = read_safetensors(os.path.join(self.dir, "engram_map.safetensors"))
        dtype, shape, raw = tensors["token_map"]
        self.assertEqual((dtype, shape), ("I64", [512]))
        ids = np.frombuffer(raw, dtype="<i8")
        next_new = 0
        for i in ids:
            self.assertLessEqual(i, next_new)
            next_new += int(i == next_new)
        self.assertEqual(next_new, 400)

    def test_engram_multipliers_are_the_official_ones(self):
        # numpy default_rng(10007 * layer).integers(0, bound, 4) * 2 + 1, as the official engram.py
        _, tensors, _ = read_safetensors(os.path.join(self.dir, "engram_map.safetensors"))
        dtype, shape, raw = tensors["multipliers"]
        self.assertEqual((dtype, shape), ("I64", [2, 4]))
        bound = (np.iinfo(np.int64).max // 400) // 2
        want = [np.random.default_rng(10007 * layer).integers(0, bound, size=4, dtype=np.int64) * 2 + 1
                for layer in (1, 5)]
        self.assertEqual(np.frombuffer(raw, dtype="<i8").reshape(2, 4).tolist(),
                         np.stack(want).tolist())


if __name__ == "__main__":
    unittest.main()
