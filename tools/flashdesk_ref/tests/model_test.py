"""End-to-end properties of the oracle on a random every-role checkpoint: a prompt fed in steps
equals its one-shot prefill, decode steps select over their own entries, bounded == exact when
the prompt fits the window, bounded keeps the global path exact, cache layouts, published top-k,
--block-inputs semantics."""
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

import numpy as np
import torch

from flashdesk_ref.checkpoint import Checkpoint
from flashdesk_ref.dump import Trace
from flashdesk_ref.model import Model
from flashdesk_ref.random_checkpoint import write_random_checkpoint
from flashdesk_ref.safetensors import FormatError, SafeTensorsFile, write_safetensors

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CONFIG = os.path.join(TOOLS, "..", "assets", "configs", "test-every-role.json")
sys.path.insert(0, TOOLS)
import ref_logits  # noqa: E402


def prompt(n, seed=3):
    return [int(v) for v in np.random.default_rng(seed).integers(3, 512, size=n)]


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.dir = os.path.join(cls.tmp, "every-role")
        write_random_checkpoint(CONFIG, cls.dir, seed=7)
        cls.model = Model(Checkpoint(cls.dir))
        cls.cfg = cls.model.cfg

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_prompt(self, ids, bounded=False, trace=False):
        state = self.model.new_state()
        tr = Trace(len(ids)) if trace else None
        logits = self.model.step(state, ids, bounded=bounded, trace=tr)
        return logits, state, tr

    def assert_same_caches(self, a, b, layers=None):
        for l, src in a.sources.items():
            self.assertTrue(torch.equal(src.comp_kv, b.sources[l].comp_kv), f"compressed KV of {l}")
            self.assertTrue(torch.equal(src.index_k, b.sources[l].index_k), f"index keys of {l}")
        for l in layers if layers is not None else range(len(a.layers)):
            self.assertTrue(torch.equal(a.layers[l].kv, b.layers[l].kv), f"ring of {l}")

    def test_a_prompt_in_steps_equals_its_one_shot_prefill(self):
        # chunks and single tokens carry the ring, pending ratio-2 tokens and the caches; with
        # prompt_end their top-k rows are as wide as the one-shot prefill's, so ties fall alike
        ids = prompt(43)
        for P in (9, 10, 20, 33, 40):   # odd: a ratio-2 token pending; > W: the ring wraps
            n = P + 3
            whole, s_whole, _ = self.run_prompt(ids[:n])
            for cuts in ((P, P + 1, P + 2), (4, 7, P)):
                last, state = self.run_steps(ids[:n], cuts, prompt_end=n)
                diff = (whole - last).abs().max().item()
                self.assertEqual(diff, 0.0, f"P={P} cuts {cuts}: max |logit difference| {diff}")
                self.assert_same_caches(s_whole, state)

    def test_decode_steps_choose_among_ties_over_their_own_entries(self):
        # without prompt_end each step's rows end at its own entries (a decode step, as the
        # official decode): at P = 40 tied index scores then fall otherwise than in the
        # one-shot prefill of the 43 tokens (the official code is not length-invariant at ties)
        ids = prompt(43)
        whole, _, _ = self.run_prompt(ids)
        last, _ = self.run_steps(ids, (40, 41, 42))
        self.assertGreater((whole - last).abs().max().item(), 0.0)

    def run_steps(self, ids, cuts, prompt_end=0):
        state = self.model.new_state()
        at = 0
        for end in tuple(cuts) + (len(ids),):
            last = self.model.step(state, ids[at:end], prompt_end=prompt_end)
            at = end
        return last, state

    def test_bounded_equals_exact_when_the_prompt_fits_the_window(self):
        for P in (12, self.cfg.sliding_window):
            ids = prompt(P, seed=P)
            exact, s_exact, _ = self.run_prompt(ids)
            bounded, s_bounded, _ = self.run_prompt(ids, bounded=True)
            self.assertTrue(torch.equal(exact, bounded), f"P={P}")
            self.assert_same_caches(s_exact, s_bounded)

    def test_bounded_replay_keeps_the_global_path_exact(self):
        ids = prompt(40)
        dfl = self.cfg.decoder_first_layer
        exact, s_exact, t_exact = self.run_prompt(ids, trace=True)
        bounded, s_bounded, t_bounded = self.run_prompt(ids, bounded=True, trace=True)
        self.assertFalse(torch.equal(exact, bounded))   # the decoder saw a truncated window
        self.assert_same_caches(s_exact, s_bounded, layers=range(dfl))  # every compressed entry too
        for l in range(dfl):
            self.assertTrue(torch.equal(t_exact.data[("block_out", l)][1], t_bounded.data[("block_out", l)][1]))
        tail = len(ids) - self.cfg.sliding_window
        for l in range(dfl, self.cfg.num_hidden_layers):
            row0, rows = t_bounded.data[("block_out", l)]
            self.assertEqual((row0, rows.shape[0]), (tail, self.cfg.sliding_window))
        # decoding continues from either state
        self.model.step(s_bounded, [5])

    def test_window_ring_slots(self):
        _, state, _ = self.run_prompt(prompt(20))
        W = self.cfg.sliding_window
        for cache in state.layers:
            self.assertEqual(sorted(cache.pos.tolist()), list(range(20 - W, 20)))
            self.assertTrue(all(int(p) % W == s for s, p in enumerate(cache.pos.tolist())))

    def test_ratio_two_keeps_an_odd_token_pending(self):
        state = self.model.new_state()
        self.model.step(state, prompt(9))
        src = state.sources[2]
        self.assertEqual((src.entries, src.pending_kv.shape[0]), (4, 1))
        self.model.step(state, [7])
        self.assertEqual((src.entries, src.pending_kv.shape[0]), (5, 0))
        self.assertEqual(state.sources[8].entries, 10)   # ratio 1: one entry per token

    def test_published_topk(self):
        P = 30
        _, _, tr = self.run_prompt(prompt(P), trace=True)
        K = self.cfg.index_topk
        for l in (2, 5, 8):   # Full layers: every visible score is finite
            ids = tr.data[("topk_idxs", l)][1]
            m = self.cfg.ratios[l]
            for t in range(P):
                valid = ids[t][ids[t] >= 0].tolist()
                self.assertEqual(len(valid), min(K, (t + 1) // m, P // m), (l, t))
                self.assertEqual(valid, sorted(valid))
                self.assertTrue(all(P <= v < P + (t + 1) // m for v in valid))   # offset P
                self.assertTrue(bool((ids[t][len(valid):] == -1).all()))
        cand = tr.data[("candidates", 8)][1]
        for l in (10, 12):    # Reindex: restricted to layer 8's candidate blocks
            ids = tr.data[("topk_idxs", l)][1]
            for t in range(P):
                chosen = ids[t][ids[t] >= 0] - P
                self.assertTrue(bool(cand[t][chosen].all()), (l, t))

    def test_candidate_blocks(self):
        P = 30
        _, _, tr = self.run_prompt(prompt(P), trace=True)
        cand = tr.data[("candidates", 8)][1].bool()
        bs, nb = self.cfg.candidate_block_size, self.cfg.candidate_topk_blocks
        for t in range(P):
            kept = {j // bs for j in range(P) if cand[t][j]}
            self.assertTrue(t // bs in kept)                       # newest visible entry's block
            self.assertLessEqual(len(kept), nb)
            self.assertTrue(all(b * bs <= t for b in kept))        # no block wholly in the future
            for b in kept:                                         # whole blocks are kept
                self.assertTrue(bool(cand[t][b * bs:min(P, (b + 1) * bs)].all()))

    def test_training_rounding_keeps_values_and_passes_gradients(self):
        from flashdesk_ref import ops
        ck = Checkpoint(self.dir)
        weight = ck.tensors["layers.3.attn.wq_a.weight"].requires_grad_(True)
        ids = prompt(20)
        ste = Model(ck, ops.Rounding(ste=True))
        logits = ste.step(ste.new_state(), ids, all_logits=True)
        plain = self.model.step(self.model.new_state(), ids, all_logits=True)
        self.assertTrue(torch.equal(logits.detach(), plain))       # STE: same forward values
        torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:])).backward()
        self.assertGreater(weight.grad.abs().sum().item(), 0.0)

    def test_missing_engram_map_is_a_clear_error(self):
        other = os.path.join(self.tmp, "no-map")
        shutil.copytree(self.dir, other)
        os.remove(os.path.join(other, "engram_map.safetensors"))
        with self.assertRaisesRegex(FormatError, "engram_map.safetensors: missing"):
            Checkpoint(other)

    def test_out_of_range_token_is_an_error(self):
        with self.assertRaisesRegex(ValueError, "outside"):
            self.model.step(self.model.new_state(), [1, 512])

    def ref_logits(self, *args):
        with contextlib.redirect_stdout(io.StringIO()):
            ref_logits.main(["--model", self.dir, *args])

    def test_ref_logits_greedy_file(self):
        ids_file = os.path.join(self.tmp, "ids.txt")
        with open(ids_file, "w") as f:
            f.write(" ".join(map(str, prompt(24))))
        out = os.path.join(self.tmp, "greedy.safetensors")
        self.ref_logits("--ids", ids_file, "--decode", "4", "--prefill", "exact", "--out", out)
        f = SafeTensorsFile(out)
        self.assertEqual(f.shape("prefill_logits"), (1, 512))
        self.assertEqual(f.get("decode_positions").tolist(), [24, 25, 26, 27])
        first = int(np.argmax(f.get("prefill_logits")[0]))
        self.assertEqual(f.get("decode_input_ids").tolist(), [first] + f.get("decode_argmax").tolist()[:3])
        self.assertEqual(f.metadata["prefill_mode"], "exact")
        self.assertEqual(f.metadata["config_name"], "test-every-role")

    def test_block_inputs_replace_each_block_input(self):
        ids_file = os.path.join(self.tmp, "ids.json")
        with open(ids_file, "w") as f:
            f.write(str(prompt(20)))
        base = os.path.join(self.tmp, "base.safetensors")
        self.ref_logits("--ids", ids_file, "--decode", "2", "--prefill", "exact", "--dump", "--out", base)
        src = SafeTensorsFile(base)
        tensors = {n: (src.dtype(n), np.array(src.get(n))) for n in src.names()}
        tensors["prefill_block_out"][1][5] += np.float32(0.5)      # another implementation's block 5
        bent = os.path.join(self.tmp, "bent.safetensors")
        write_safetensors(bent, tensors, src.metadata)
        rerun = os.path.join(self.tmp, "rerun.safetensors")
        self.ref_logits("--block-inputs", bent, "--prefill", "exact", "--dump", "--out", rerun)
        a, b = src.get("prefill_block_out"), SafeTensorsFile(rerun).get("prefill_block_out")
        changed = [l for l in range(a.shape[0]) if not np.array_equal(a[l], b[l])]
        self.assertEqual(changed, [6])   # only the block fed the altered input
        self.assertTrue(np.array_equal(src.get("decode_logits"), SafeTensorsFile(rerun).get("decode_logits")))

    def test_block_inputs_from_a_bf16_dump(self):
        # The official goldens store embeddings and block outputs as BF16 (their values are
        # BF16-valued): read as numbers, they feed the blocks what the F32 dump does.
        ids_file = os.path.join(self.tmp, "ids.json")
        with open(ids_file, "w") as f:
            f.write(str(prompt(20)))
        base = os.path.join(self.tmp, "base32.safetensors")
        self.ref_logits("--ids", ids_file, "--prefill", "exact", "--dump", "--out", base)
        src = SafeTensorsFile(base)
        tensors = {n: (src.dtype(n), np.array(src.get(n))) for n in src.names()}
        for name in ("prefill_embed", "prefill_block_out"):
            x = np.ascontiguousarray(tensors[name][1], dtype=np.float32)
            bits = (x.view(np.uint32) >> 16).astype(np.uint16)
            self.assertTrue(np.array_equal((bits.astype(np.uint32) << 16).view(np.float32), x), name)
            tensors[name] = ("BF16", bits)
        bf16 = os.path.join(self.tmp, "bf16.safetensors")
        write_safetensors(bf16, tensors, src.metadata)
        rerun = os.path.join(self.tmp, "rerun16.safetensors")
        self.ref_logits("--block-inputs", bf16, "--prefill", "exact", "--dump", "--out", rerun)
        self.assertTrue(np.array_equal(src.get("prefill_block_out"), SafeTensorsFile(rerun).get("prefill_block_out")))


if __name__ == "__main__":
    unittest.main()
