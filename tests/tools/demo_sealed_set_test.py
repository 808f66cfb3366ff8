"""The sealed test set's generator (tools/demo/sealed_test.py): deterministic, answers true to the
scene, its wordings absent from the training templates, its 16-bit PNGs the 8-bit values x 257,
its JPEGs baseline 4:2:0 files of the picture's size (tools/demo/jpeg.py)."""

import json
import os
import pathlib
import struct
import tempfile
import unittest
import zlib

import numpy as np

import demo_support  # noqa: F401  (puts tools/ on the path)
from demo import jpeg, png, sealed_test, shapes
from demo.lexicon import SHAPES

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools", "demo")


def _write(n):
    out = tempfile.mkdtemp()
    items = list(sealed_test.image_items(n, out))
    files = {it["id"]: pathlib.Path(out, it["messages"][0]["content"][0]["path"]).read_bytes() for it in items}
    return items, files


def _jpeg_size(data):
    """(width, height) from a JPEG's frame header, walking its segments from SOI to SOF0."""
    assert data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9", "no SOI / EOI"
    pos = 2
    while data[pos] == 0xFF:
        marker, (length,) = data[pos + 1], struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker == 0xC0:
            precision, h, w, components = struct.unpack(">BHHB", data[pos + 4 : pos + 10])
            assert (precision, components) == (8, 3)
            return w, h
        pos += 2 + length
    raise AssertionError("no baseline frame header")


class SealedSetTest(unittest.TestCase):
    def test_deterministic(self):
        a, fa = _write(6)
        b, fb = _write(6)
        self.assertEqual(json.dumps(a), json.dumps(b))
        self.assertEqual(fa, fb)

    def test_answers_fit_the_scene_and_the_styles_vary(self):
        items, files = _write(40)
        kinds, bits, aspects, formats = set(), set(), set(), set()
        for it in items:
            meta, expected = it["meta"], it["expected"]
            self.assertTrue(100 <= min(meta["width"], meta["height"]) <= 1000, meta)
            kinds.add(meta["question_kind"])
            bits.add(meta["bits"])
            aspects.add(round(meta["width"] / meta["height"], 2))
            self.assertNotIn(expected, it["distractors"])
            data = files[it["id"]]
            formats.add(meta["format"])
            if meta["format"] == "jpeg":
                self.assertEqual(meta["bits"], 8)
                self.assertEqual(_jpeg_size(data), (meta["width"], meta["height"]))
            else:
                w, h, depth = struct.unpack(">IIB", data[16:25])
                self.assertEqual((w, h, depth), (meta["width"], meta["height"], meta["bits"]))
            if meta["question_kind"] == "test_count_all":
                self.assertTrue(expected.isdigit())
            if meta["question_kind"] == "test_exists":
                self.assertIn(expected, ("yes", "no"))
            if meta["question_kind"] == "test_position":
                self.assertIn(expected, shapes.ALL_POSITIONS)
        self.assertGreaterEqual(len(kinds), 5)
        self.assertEqual(bits, {8, 16})
        self.assertEqual(formats, {"png", "jpeg"})
        self.assertGreater(len(aspects), 2)

    def test_unknown_questions_name_absent_objects(self):
        out = tempfile.mkdtemp()
        items = list(sealed_test.unknown_items(12, out))
        colour_questions = 0
        for it in items:
            self.assertEqual(it["expected"], "can't tell")
            self.assertEqual(it["meta"]["question_kind"], "test_cant_tell")
            self.assertTrue(pathlib.Path(out, it["messages"][0]["content"][0]["path"]).is_file())
            present, absent = it["meta"]["present"], it["meta"]["absent"]
            question = it["messages"][0]["content"][1]["text"]
            self.assertRegex(question, rf"\b{absent}\b")
            if set(it["distractors"]) == set(shapes.SHAPE_COLOURS):  # the colour of an absent shape
                colour_questions += 1
                self.assertIn(absent, SHAPES)
                self.assertFalse(any(p.endswith(" " + absent) for p in present), (absent, present))
            else:  # the place of an absent coloured shape
                self.assertEqual(set(it["distractors"]), set(shapes.ALL_POSITIONS))
                self.assertNotIn(absent, present)
        self.assertGreater(colour_questions, 0)
        self.assertLess(colour_questions, len(items))

    def test_wordings_are_not_the_training_ones(self):
        training = "".join(pathlib.Path(TOOLS, f).read_text(encoding="utf-8")
                           for f in os.listdir(TOOLS) if f.endswith(".py") and f != "sealed_test.py")
        for kind, phrases in list(sealed_test.TEST_PHRASES.items()) + list(sealed_test.ARITH_PHRASES.items()):
            for p in phrases:
                for fixed in p.replace("{", "|{").replace("}", "}|").split("|"):
                    if fixed.startswith("{") or len(fixed.strip()) < 12:
                        continue
                    self.assertFalse(fixed.strip() in training, f"{kind}: {p!r} is a training wording")
        keys = ("name", "fav_colour", "place:I live in", "place:I work in", "pet", "rel_boss", "gate code",
                "bus number")
        for q in {sealed_test.recall_question(sealed_test.Rng(i), k) for i in range(6) for k in keys}:
            self.assertFalse(q in training, f"recall: {q!r} is a training wording")

    def test_arithmetic_answers_are_the_results(self):
        items = list(sealed_test.arithmetic_items(6))
        self.assertEqual(len(items), 2 * 6 * len(sealed_test.ARITH_EFFORTS))
        for it in items:
            a, b, op = it["meta"]["a"], it["meta"]["b"], it["meta"]["op"]
            self.assertTrue(1000 <= b <= a <= 9999 or op == "test_add")
            self.assertEqual(it["expected"], str(a + b if op == "test_add" else a - b))
            self.assertIn(str(a), it["messages"][-1]["content"])
            self.assertIn(it["effort"], sealed_test.ARITH_EFFORTS)

    def test_recall_questions_are_reworded_and_keep_the_fact(self):
        items = list(sealed_test.recall_items(2, demo_support.tokenizer()))
        self.assertEqual(len(items), 2 * len(sealed_test.RECALL_DISTANCES))
        for it in items:
            question = it["messages"][-1]["content"]
            self.assertTrue(question.startswith(("Remind me", "Which", "In which")), question)
            self.assertIn(it["expected"], it["reference"]["thinking"])  # the fact is in the chat
            self.assertLess(abs(it["meta"]["distance_tokens"] - it["meta"]["distance_bucket"]),
                            it["meta"]["distance_bucket"] // 4)
        for key in ("name", "fav_colour", "place:I live in", "pet", "rel_sister", "access code", "room number"):
            self.assertTrue(sealed_test.recall_question(sealed_test.Rng(1), key))

    def test_sixteen_bit_png_is_the_same_picture(self):
        rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 13
        data = png.encode_png(rgb, bits=16)
        self.assertEqual(struct.unpack(">IIBB", data[16:26]), (3, 2, 16, 2))
        (length,) = struct.unpack(">I", data[33:37])
        self.assertEqual(data[37:41], b"IDAT")
        raw = zlib.decompress(data[41:41 + length])
        rows = [raw[y * (1 + 18):(y + 1) * (1 + 18)] for y in range(2)]
        for y, row in enumerate(rows):
            self.assertEqual(row[0], 0)
            np.testing.assert_array_equal(np.frombuffer(row[1:], dtype=">u2").reshape(3, 3), rgb[y] * 257)
        with self.assertRaises(ValueError):
            png.encode_png(rgb, bits=12)


if __name__ == "__main__":
    unittest.main()


class JpegWriterTest(unittest.TestCase):
    def test_segments_tables_and_scan(self):
        rgb = np.zeros((37, 53, 3), np.uint8)
        rgb[5:20, 10:40] = [220, 40, 30]
        data = jpeg.encode_jpeg(rgb, 90)
        self.assertEqual(_jpeg_size(data), (53, 37))
        self.assertEqual(data, jpeg.encode_jpeg(rgb, 90))  # deterministic
        # Two quantisation tables, four Huffman tables, one scan; 0xFF in the scan is stuffed.
        self.assertEqual(data.count(b"\xff\xdb"), 2)
        self.assertEqual(data.count(b"\xff\xc4"), 4)
        scan = data[data.index(b"\xff\xda") + 2 + 12 : -2]
        stray = [i for i in range(len(scan) - 1) if scan[i] == 0xFF and scan[i + 1] != 0x00]
        self.assertEqual(stray, [])
        # A flat picture is one DC value a block and an end of block: a few bytes a block.
        flat = jpeg.encode_jpeg(np.full((64, 64, 3), 128, np.uint8), 90)
        self.assertLess(len(flat), 700)

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            jpeg.encode_jpeg(np.zeros((8, 8), np.uint8))
        with self.assertRaises(ValueError):
            jpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8), quality=0)
