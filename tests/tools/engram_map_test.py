"""tools/engram_map.py on a hand-made byte-level tokenizer.json (numpy only)."""
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

import engram_map  # noqa: E402
from flashdesk_ref.safetensors import SafeTensorsFile  # noqa: E402
from flashdesk_ref.token_map import TokenizerJson, compressed_token_map, normalise  # noqa: E402

# (byte-level vocab string, compressed id expected, why)
VOCAB = [
    ("Hello", 1, "lowercased"),
    ("\u0120hello", 1, "'Ġ' is the byte of a space; stripped"),
    ("\u0120", 2, "a lone space survives through the sentinel"),
    ("\u010a", 2, "newline collapses to one space"),
    ("\u0120\u0120", 2, "two spaces collapse to one"),
    ("\u00c3\u00a9", 3, "bytes C3 A9 = 'é' -> NFD e + U+0301 -> accent dropped"),
    ("e", 3, "same key as 'é'"),
    ("\u00c3", 4, "byte C3 alone is invalid UTF-8 -> keyed by its raw string"),
    ("\u00ef\u00ac\u0123", 5, "bytes EF AC 81 = U+FB01 'ﬁ' -> NFKC 'fi'"),
    ("fi", 5, "same key as the ligature"),
    ("HELLO", 1, "lowercased"),
]
ADDED = [(0, "<s>", 0), (12, "<\uff5cUser\uff5c>", 6), (13, "<|user|>", 6)]
MORE = [("\u03a3", 7, "Greek capital sigma: not in the byte alphabet, decoded from UTF-8"),
        ("\u03c3", 7, "per-character lowercase (no final-sigma rule)"),
        ("\u0915\u093e", 8, "Devanagari KA + vowel sign AA (Mc): all marks are dropped"),
        ("\u0915", 8, "KA alone")]


def tokenizer_json(path):
    vocab = {tok: i + 1 for i, (tok, _, _) in enumerate(VOCAB)}
    vocab.update({tok: 14 + i for i, (tok, _, _) in enumerate(MORE)})
    data = {"model": {"type": "BPE", "vocab": vocab, "merges": []},
            "added_tokens": [{"id": i, "content": c, "special": True} for i, c, _ in ADDED if i != 13],
            "decoder": {"type": "ByteLevel", "add_prefix_space": False}}
    data["model"]["vocab"]["<|user|>"] = 13     # a plain vocab token with the normalised spelling
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


EXPECTED = [0] + [c for _, c, _ in VOCAB] + [6, 6] + [c for _, c, _ in MORE]


class EngramMapTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.tok = os.path.join(self.tmp.name, "tokenizer.json")
        tokenizer_json(self.tok)

    def tearDown(self):
        self.tmp.cleanup()

    def test_map_by_hand(self):
        token_map, size = compressed_token_map(TokenizerJson(self.tok))
        self.assertEqual(token_map, EXPECTED)
        self.assertEqual(size, 9)

    def test_normalise_rules(self):
        self.assertEqual(normalise(" \t Caf\u00e9\n\n"), "cafe")
        self.assertEqual(normalise("\r\n"), " ")
        self.assertEqual(normalise("a  b"), "a b")
        self.assertEqual(normalise("\u3000x\u3000"), "x")     # ideographic space: NFKC -> space, stripped
        self.assertEqual(normalise("\u2028"), "")             # White_Space but not in [ \t\r\n]: stripped
        self.assertEqual(normalise("\u00bd"), "1\u20442")     # NFKC fraction

    def write_config(self, compressed):
        cfg = {"text_config": {"num_hidden_layers": 3, "compress_ratios": [0, 0, 0], "vocab_size": 18,
                               "engram_layer_ids": [1], "engram_num_embeddings": [0],
                               "engram_compressed_vocab_size": compressed}}
        os.makedirs(os.path.join(self.tmp.name, "m"), exist_ok=True)
        with open(os.path.join(self.tmp.name, "m", "config.json"), "w") as f:
            json.dump(cfg, f)

    def test_cli_writes_the_map_and_multipliers(self):
        self.write_config(9)
        with contextlib.redirect_stdout(io.StringIO()):
            rc = engram_map.main(["--tokenizer", self.tok, "--model", os.path.join(self.tmp.name, "m")])
        self.assertEqual(rc, 0)
        f = SafeTensorsFile(os.path.join(self.tmp.name, "m", "engram_map.safetensors"))
        self.assertEqual(f.get("token_map").tolist(), EXPECTED)
        bound = (np.iinfo(np.int64).max // 9) // 2
        want = np.random.default_rng(10007 * 1).integers(0, bound, size=4, dtype=np.int64) * 2 + 1
        self.assertEqual(f.get("multipliers").tolist(), [want.tolist()])

    def test_cli_refuses_a_size_that_disagrees_with_the_config(self):
        self.write_config(10)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = engram_map.main(["--tokenizer", self.tok, "--model", os.path.join(self.tmp.name, "m")])
        self.assertEqual(rc, 1)
        self.assertIn("9 compressed tokens", err.getvalue())

    def test_unsupported_decoder_is_reported(self):
        with open(self.tok) as f:
            data = json.load(f)
        data["decoder"] = {"type": "Metaspace"}
        with open(self.tok, "w") as f:
            json.dump(data, f)
        with self.assertRaisesRegex(ValueError, "ByteLevel"):
            TokenizerJson(self.tok)


if __name__ == "__main__":
    unittest.main()
