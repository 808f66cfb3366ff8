"""Unit tests of tools/compare_logits.py on small synthetic dump files (numpy only)."""
import contextlib
import io
import json
import os
import struct
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))

import compare_logits  # noqa: E402

DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8"}


def write_file(path, tensors, metadata=None):
    """A minimal safetensors writer, independent of the one in tools/."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": DTYPES[array.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata or {"engine": "test", "prefill_mode": "exact", "config_name": "t"}
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def base_dump(P=2, L=2, hc=1, D=4, V=5, T=2):
    """Embedding e, block 0 adds 1.0 everywhere, block 1 adds 2.0: block deltas of known RMS."""
    e = np.arange(P * D, dtype=np.float32).reshape(P, D) / 10
    out0 = e[:, None, :] + 1.0
    out1 = out0 + 2.0
    logits = np.linspace(-1, 1, P * V, dtype=np.float32).reshape(P, V)
    dec_e = np.ones((T, 1, D), np.float32)
    dec_out0 = dec_e[:, :, None, :] + 1.0
    dec_out = np.stack([dec_out0, dec_out0 + 4.0], axis=1)        # [T, L, 1, hc, D]
    return {
        "prompt_ids": np.arange(P, dtype=np.int64),
        "prefill_logits": logits[-1:].copy(),
        "prefill_embed": e,
        "prefill_block_out": np.stack([out0, out1]).astype(np.float32),
        "prefill_block_pre_mix": np.ones((L, P, hc), np.float32),
        "prefill_positions_run": np.ones((L, P), np.uint8),
        "prefill_expert_ids": np.array([[[1, 2], [3, 4]], [[0, 1], [2, 3]]], dtype=np.int64),
        "prefill_topk_idxs.layer1": np.array([[5, 7, -1], [5, 6, 8]], dtype=np.int64),
        "prefill_engram_hash_ids": np.array([[[3, 9]], [[4, 11]]], dtype=np.int64),
        "decode_logits": np.array([[0, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=np.float32),
        "decode_input_ids": np.array([1, 1], dtype=np.int64),
        "decode_positions": np.array([P, P + 1], dtype=np.int64),
        "decode_argmax": np.array([1, 0], dtype=np.int64),
        "decode_embed": dec_e,
        "decode_block_out": dec_out.astype(np.float32),
        "decode_expert_ids": np.zeros((T, L, 1, 2), dtype=np.int64),
    }


class CompareLogitsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.tmp.name, "a.safetensors")
        self.b = os.path.join(self.tmp.name, "b.safetensors")

    def tearDown(self):
        self.tmp.cleanup()

    def run_main(self, *extra):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = compare_logits.main([self.a, self.b, *extra])
        return rc, buf.getvalue()

    def write_pair(self, b_changes):
        a = base_dump()
        write_file(self.a, a)
        b = {k: v.copy() for k, v in a.items()}
        b_changes(b)
        write_file(self.b, b)

    def test_identical_files_pass(self):
        self.write_pair(lambda b: None)
        rc, out = self.run_main()
        self.assertEqual(rc, 0, out)
        self.assertIn("OK", out)

    def test_block_error_is_delta_over_block_update(self):
        # block 1 changes the stream by 2.0 everywhere; B is off by 0.01 -> 0.01 / 2 = 5e-3
        self.write_pair(lambda b: b["prefill_block_out"].__setitem__(1, b["prefill_block_out"][1] + 0.01))
        errs = compare_logits.block_errors_prefill(compare_logits.Dump(self.a), compare_logits.Dump(self.b))
        self.assertEqual(errs[0], 0.0)
        self.assertAlmostEqual(errs[1], 0.005, places=6)

    def test_block_error_beyond_tolerance_fails(self):
        self.write_pair(lambda b: b["prefill_block_out"].__setitem__(1, b["prefill_block_out"][1] + 0.1))
        rc, out = self.run_main()
        self.assertEqual(rc, 1, out)
        self.assertIn("block 1 prefill relative error", out)
        rc, out = self.run_main("--block-tol", "0.06")
        self.assertEqual(rc, 0, out)
        rc, out = self.run_main("--tolerances", "block=0.06")
        self.assertEqual(rc, 0, out)

    def test_rows_not_run_are_ignored(self):
        def change(b):
            b["prefill_block_out"][1, 0] = 1000.0    # garbage in a row B did not run
            b["prefill_positions_run"][1, 0] = 0
        self.write_pair(change)
        errs = compare_logits.block_errors_prefill(compare_logits.Dump(self.a), compare_logits.Dump(self.b))
        self.assertEqual(errs, [0.0, 0.0])

    def test_decode_block_error_uses_decode_embed(self):
        # decode block 1 adds 4.0; B off by 0.04 in block 1 -> 1e-2
        self.write_pair(lambda b: b["decode_block_out"].__setitem__((slice(None), 1), b["decode_block_out"][:, 1] + 0.04))
        errs = compare_logits.block_errors_decode(compare_logits.Dump(self.a), compare_logits.Dump(self.b), 2)
        self.assertEqual(errs[0], 0.0)
        self.assertAlmostEqual(errs[1], 0.01, places=6)

    def test_logits_relative_rms(self):
        a = np.array([3.0, 4.0])
        s = compare_logits.tensor_stats(a, a + np.array([0.3, 0.4]))
        self.assertAlmostEqual(s["rel_rms"], 0.1)
        self.assertAlmostEqual(s["max_abs"], 0.4)
        self.assertAlmostEqual(s["cosine"], 1.0)
        self.write_pair(lambda b: b.__setitem__("prefill_logits", b["prefill_logits"] * 1.05))
        rc, out = self.run_main()
        self.assertEqual(rc, 1)
        self.assertIn("prefill_logits: relative RMS", out)
        rc, _ = self.run_main("--logits-tol", "0.06")
        self.assertEqual(rc, 0)

    def test_argmax_agreement(self):
        a = np.array([[0, 1, 0], [1, 0, 0]], dtype=np.float32)
        b = np.array([[0, 1, 0], [0, 0, 1]], dtype=np.float32)
        self.assertEqual(compare_logits.argmax_agreement(a, b), 0.5)

    def test_expert_ids_compared_as_sets(self):
        a = np.array([[1, 2], [3, 4]])
        b = np.array([[2, 1], [3, 5]])
        self.assertEqual(compare_logits.set_match_rows(a, b).tolist(), [True, False])

    def test_expert_id_mismatch_fails_below_rate(self):
        self.write_pair(lambda b: b["prefill_expert_ids"].__setitem__((0, 0), [2, 1]))  # same set
        rc, out = self.run_main()
        self.assertEqual(rc, 0, out)
        self.write_pair(lambda b: b["prefill_expert_ids"].__setitem__((0, 0), [1, 5]))  # 3 of 4 rows agree
        rc, out = self.run_main()
        self.assertEqual(rc, 1)
        self.assertIn("prefill_expert_ids", out)
        rc, out = self.run_main("--id-match", "0.75")
        self.assertEqual(rc, 0, out)

    def test_topk_sets_ignore_none_entries(self):
        self.assertEqual(compare_logits.set_match_rows(np.array([[5, 7, -1]]), np.array([[7, 5, -1]])).tolist(), [True])
        self.write_pair(lambda b: b["prefill_topk_idxs.layer1"].__setitem__(1, [5, 6, 9]))
        rc, out = self.run_main()
        self.assertEqual(rc, 1)
        self.assertIn("prefill_topk_idxs.layer1", out)

    def test_hash_ids_must_match_exactly(self):
        self.write_pair(lambda b: b["prefill_engram_hash_ids"].__setitem__((1, 0, 1), 12))
        rc, out = self.run_main()
        self.assertEqual(rc, 1)
        self.assertIn("prefill_engram_hash_ids", out)

    def test_diverged_greedy_decode_compares_the_common_prefix(self):
        def change(b):
            b["decode_input_ids"][1] = 3
            b["decode_logits"][1] = [0, 0, 0, 9, 0]  # would fail if step 1 were compared
        self.write_pair(change)
        rc, out = self.run_main()
        self.assertEqual(rc, 0, out)
        self.assertIn("comparing the first 1 steps", out)

    def test_different_prompts_cannot_be_compared(self):
        self.write_pair(lambda b: b.__setitem__("prompt_ids", b["prompt_ids"] + 1))
        rc, out = self.run_main()
        self.assertEqual(rc, 2)
        self.assertIn("different prompts", out)

    def test_shape_mismatch_cannot_be_compared(self):
        self.write_pair(lambda b: b.__setitem__("prefill_logits", np.zeros((1, 4), np.float32)))
        rc, out = self.run_main()
        self.assertEqual(rc, 2)

    def test_unknown_tolerance_name_is_an_error(self):
        self.write_pair(lambda b: None)
        with self.assertRaises(SystemExit):
            with contextlib.redirect_stderr(io.StringIO()):
                self.run_main("--tolerances", "nonsense=1")


if __name__ == "__main__":
    unittest.main()
