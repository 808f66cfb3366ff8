"""The numpy safetensors reader/writer and number formats of tools/flashdesk_ref (numpy only)."""
import json
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

from flashdesk_ref import formats  # noqa: E402
from flashdesk_ref.safetensors import FormatError, SafeTensorsFile, write_safetensors  # noqa: E402


class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "t.safetensors")

    def tearDown(self):
        self.tmp.cleanup()

    def raw(self, header, data=b""):
        text = json.dumps(header).encode()
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)

    def test_round_trip_of_every_dtype(self):
        tensors = {
            "f32": ("F32", np.array([[1.5, -2.0]], np.float32)),
            "bf16": ("BF16", formats.f32_to_bf16_bits(np.array([1.0, -3.0], np.float32))),
            "e4m3": ("F8_E4M3", np.array([0x38, 0x7E], np.uint8)),
            "e8m0": ("F8_E8M0", np.array([127, 130], np.uint8)),
            "fp4": ("I8", np.array([[0xA3]], np.uint8)),
            "u8": ("U8", np.array([1, 0], np.uint8)),
            "i64": ("I64", np.array([-1, 2 ** 40], np.int64)),
        }
        write_safetensors(self.path, tensors, {"k": "v"})
        f = SafeTensorsFile(self.path)
        self.assertEqual(f.metadata, {"k": "v"})
        for name, (dtype, value) in tensors.items():
            self.assertEqual(f.dtype(name), dtype)
            np.testing.assert_array_equal(f.get(name), value)
        self.assertEqual(formats.bf16_bits_to_f32(f.get("bf16")).tolist(), [1.0, -3.0])
        self.assertEqual(formats.unpack_e2m1(f.get("fp4")).tolist(), [[1.5, -1.0]])  # low nibble first

    def test_truncated_file(self):
        with open(self.path, "wb") as f:
            f.write(b"\x05\x00")
        with self.assertRaisesRegex(FormatError, "t.safetensors: shorter than"):
            SafeTensorsFile(self.path)

    def test_header_longer_than_file(self):
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", 1000) + b"{}")
        with self.assertRaisesRegex(FormatError, "header length 1000"):
            SafeTensorsFile(self.path)

    def test_header_not_json(self):
        with open(self.path, "wb") as f:
            f.write(struct.pack("<Q", 3) + b"{x}")
        with self.assertRaisesRegex(FormatError, "not valid JSON"):
            SafeTensorsFile(self.path)

    def test_offsets_outside_the_data(self):
        self.raw({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4)
        with self.assertRaisesRegex(FormatError, "tensor 'w': data_offsets"):
            SafeTensorsFile(self.path)

    def test_size_disagrees_with_shape(self):
        self.raw({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
        with self.assertRaisesRegex(FormatError, "tensor 'w': 8 bytes for shape"):
            SafeTensorsFile(self.path)

    def test_unknown_dtype(self):
        self.raw({"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
        with self.assertRaisesRegex(FormatError, "unsupported dtype 'F7'"):
            SafeTensorsFile(self.path)

    def test_missing_tensor(self):
        write_safetensors(self.path, {"a": ("U8", np.zeros(1, np.uint8))})
        with self.assertRaisesRegex(FormatError, "no tensor named 'b'"):
            SafeTensorsFile(self.path).get("b")


class FormatsTest(unittest.TestCase):
    """Hand values shared with tests/engine/numeric_test.cpp."""

    def test_e4m3_known_codes(self):
        t = formats.E4M3_TABLE
        self.assertEqual((t[0x00], t[0x38], t[0x7E], t[0x01], t[0x08], t[0xBC]),
                         (0.0, 1.0, 448.0, 2.0 ** -9, 2.0 ** -6, -1.5))
        self.assertTrue(np.isnan(t[0x7F]) and np.isnan(t[0xFF]))

    def test_e4m3_encoder_round_trips_every_finite_code(self):
        codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
        back = formats.f32_to_e4m3_codes(formats.E4M3_TABLE[codes])
        np.testing.assert_array_equal(formats.E4M3_TABLE[back], formats.E4M3_TABLE[codes])

    def test_e4m3_ties_to_even(self):
        x = np.array([1.0625, 1.1875, 1.5 * 2 ** -9, 15.5, 1000.0, -1000.0], np.float32)
        got = formats.E4M3_TABLE[formats.f32_to_e4m3_codes(x)]
        self.assertEqual(got.tolist(), [1.0, 1.25, 2 * 2 ** -9, 16.0, 448.0, -448.0])

    def test_e2m1_rounding_table(self):
        x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 0.3, -2.9], np.float32)
        got = formats.E2M1_TABLE[formats.f32_to_e2m1_codes(x)]
        self.assertEqual(got.tolist(), [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 0.5, -3.0])
        self.assertEqual(formats.pack_e2m1(np.array([0x3, 0xA], np.uint8)).tolist(), [0xA3])

    def test_bf16_ties_to_even(self):
        x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8], np.float32)
        self.assertEqual(formats.f32_to_bf16_bits(x).tolist(), [0x3F80, 0x3F80, 0x3F82])
        self.assertEqual(formats.bf16_bits_to_f32(np.array([0xC040], np.uint16)).tolist(), [-3.0])

    def test_e8m0(self):
        self.assertEqual(formats.e8m0_ceil_code(np.array([1.0, 1.5, 0.25], np.float32)).tolist(), [127, 128, 125])
        self.assertEqual(formats.e8m0_to_f32(np.array([130, 0], np.uint8)).tolist(), [8.0, 2.0 ** -127])


if __name__ == "__main__":
    unittest.main()
