"""tools/official_dspark_goldens.py without the official code's torch >= 2.9: the check of the
official source for what the script calls, the argument handling, the golden's tensor layout, the
rows the noise band compares, and the summation variants against the plain sums (torch 1.13 here).
With a local copy of the official inference/ folder (FD_OFFICIAL, or .official/inference in the
checkout) the source check runs on it too."""
import os
import sys
import tempfile
import textwrap
import unittest

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import official_dspark_goldens as odg  # noqa: E402

# The parts of the official model.py the script calls, as stubs.
SOURCE = textwrap.dedent('''
    import torch.nn.functional as F
    from .kernel_cpu import fp4_gemm, fp8_gemm

    class ModelArgs:
        temperature: float = 1
        n_mtp_layers: int = 1
        dspark_block_size: int = 0
        dspark_noise_token_id: int = 0
        dspark_target_layer_ids: tuple = ()
        dspark_markov_rank: int = 256
        dspark_n_routed_experts: int = 0
        dspark_n_activated_experts: int = 0

    def linear(x, weight, bias=None): pass
    def sample(logits, temperature=1.0): pass
    def make_identity_pre_mix(x, hc_mult): pass
    def get_dspark_topk_idxs(window_size, bsz, block_size, start_pos): pass

    class Block:
        def forward(self, x, start_pos, pre_mix, image_mask, *attn_args): pass

    class DSparkAttention:
        def forward(self, x, start_pos, main_x): pass

    class DSparkMarkovHead:
        def forward(self, token_ids): pass

    class DSparkConfidenceHead:
        def forward(self, hidden, markov_embed): pass

    class DSparkBlock(Block):
        def forward(self, x, start_pos, pre_mix, main_x): pass
        def forward_embed(self, main_hidden, input_ids): pass
        def forward_head(self, x, pre_mix, input_ids): pass

    class Transformer:
        def __init__(self, args, tokenizer=None): pass
        def forward(self, input_ids, start_pos=0, images=None, token_types=None): pass
        def forward_spec(self, input_ids, main_hidden, start_pos=0): pass
''')


def official_dir(source):
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "model.py"), "w") as f:
        f.write(source)
    return d


class SourceCheck(unittest.TestCase):
    def test_the_official_api_passes(self):
        self.assertEqual(odg.official_api_problems(official_dir(SOURCE)), [])

    def test_names_each_missing_piece(self):
        source = (SOURCE.replace("def forward_spec", "def forward_speculative")
                  .replace("def forward_head(self, x, pre_mix, input_ids)",
                           "def forward_head(self, x, input_ids)")
                  .replace("    dspark_markov_rank: int = 256\n", "")
                  .replace("class DSparkConfidenceHead", "class ConfidenceHead")
                  .replace("def get_dspark_topk_idxs", "def dspark_topk_idxs"))
        problems = odg.official_api_problems(official_dir(source))
        self.assertIn("Transformer has no method forward_spec", problems)
        self.assertIn("DSparkBlock.forward_head('self', 'x', 'input_ids') is not "
                      "DSparkBlock.forward_head('self', 'x', 'pre_mix', 'input_ids')", problems)
        self.assertIn("ModelArgs has no field dspark_markov_rank", problems)
        self.assertIn("model.py has no class DSparkConfidenceHead", problems)
        self.assertIn("model.py has no function get_dspark_topk_idxs", problems)
        self.assertEqual(len(problems), 5, problems)

    def test_a_folder_without_model_py(self):
        self.assertEqual(len(odg.official_api_problems(tempfile.mkdtemp())), 1)

    def test_main_check_source_exit_codes(self):
        self.assertEqual(odg.main(["--official", official_dir(SOURCE), "--check-source"]), 0)
        broken = official_dir(SOURCE.replace("class Transformer", "class Model"))
        self.assertEqual(odg.main(["--official", broken, "--check-source"]), 2)

    def test_main_needs_a_model_and_an_output_folder(self):
        with self.assertRaises(SystemExit) as e:
            odg.main(["--official", official_dir(SOURCE), "--out-dir", tempfile.mkdtemp()])
        self.assertEqual(e.exception.code, 2)

    @unittest.skipUnless(os.path.exists(os.path.join(
        os.environ.get("FD_OFFICIAL", os.path.join(ROOT, ".official", "inference")), "model.py")),
        "no local copy of the official inference/ folder")
    def test_the_local_official_copy(self):
        folder = os.environ.get("FD_OFFICIAL", os.path.join(ROOT, ".official", "inference"))
        self.assertEqual(odg.official_api_problems(folder), [])


def find_cli():
    for preset in ("release", "engine-only", "debug"):
        path = os.path.join(ROOT, "build", preset, "bin", "flashdesk-cli")
        if os.access(path, os.X_OK):
            return path
    return None


@unittest.skipUnless(os.path.exists(os.path.join(
    os.environ.get("FD_OFFICIAL", os.path.join(ROOT, ".official", "inference")), "model.py"))
    and find_cli() and not hasattr(torch, "float8_e8m0fnu"),
    "needs the official copy, a flashdesk-cli and a torch without float8 (the emulated run)")
class EmulatedRun(unittest.TestCase):
    """The whole script on the official code with emulated float8/float4 (tools/official_emulated.py):
    the files it writes, and the head alone on the recorded features reproducing them exactly."""

    def test_writes_the_golden_and_the_manifest(self):
        import json
        import subprocess
        folder = os.environ.get("FD_OFFICIAL", os.path.join(ROOT, ".official", "inference"))
        tmp = tempfile.mkdtemp()
        ckpt, out = os.path.join(tmp, "ckpt"), os.path.join(tmp, "out")
        subprocess.run([find_cli(), "make-random", "--config",
                        os.path.join(ROOT, odg.CONFIG), "--out", ckpt, "--seed", str(odg.SEED)],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "official_emulated.py"),
                        os.path.join(ROOT, "tools", "official_dspark_goldens.py"),
                        "--official", folder, "--model", ckpt, "--out-dir", out, "--no-oracle"],
                       check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, odg.MANIFEST)) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["replay_of_the_head_alone"],
                         {"worst_logit": 0.0, "worst_confidence": 0.0, "steps_with_other_ids": 0})
        self.assertGreater(manifest["noise_band"]["logits"], 0.0)
        import official_goldens as og
        golden = og.read_safetensors(os.path.join(out, odg.GOLDEN))
        self.assertEqual(tuple(golden["long_draft_logits"][1].shape), (6, 5, 512))
        self.assertEqual(tuple(golden["short_target_inputs"][1].shape), (11, 3, 4, 256))


def record(B=3, V=4, steps=2):
    g = torch.Generator().manual_seed(1)
    return {"prompt_ids": torch.tensor([5, 6, 7]),
            "prompt_features": torch.randn(3, 2, 4, generator=g).bfloat16().float(),
            "step_ids": torch.tensor([8, 9][:steps]),
            "draft_ids": torch.tensor([[1, 2, 3], [3, 2, 1]][:steps]),
            "draft_logits": torch.randn(steps, B, V, generator=g),
            "draft_confidence": torch.randn(steps, B, generator=g)}


class Files(unittest.TestCase):
    def test_golden_tensors(self):
        rec = record()
        out = odg.golden_tensors({"long": rec}, (0.25, 0.5))
        self.assertEqual(out["long_prompt_features"].dtype, np.uint16)  # BF16 bits
        self.assertEqual(out["long_prompt_features"].shape, (3, 2, 4))
        widened = (out["long_prompt_features"].astype(np.uint32) << 16).view(np.float32)
        np.testing.assert_array_equal(widened, rec["prompt_features"].numpy())
        self.assertEqual(out["long_draft_ids"].dtype, np.int64)
        self.assertEqual(out["long_draft_logits"].dtype, np.float32)
        self.assertEqual(out["noise_logits"].tolist(), [0.25])
        self.assertEqual(out["noise_confidence"].tolist(), [0.5])

    def test_features_must_be_bf16_valued(self):
        rec = record()
        rec["prompt_features"] = rec["prompt_features"] + 1e-4
        with self.assertRaises(SystemExit):
            odg.golden_tensors({"long": rec}, (0.0, 0.0))


class Compared(unittest.TestCase):
    def test_rows_up_to_the_first_differing_id(self):
        rec = record()
        ids = rec["draft_ids"].clone()
        logits = rec["draft_logits"].clone()
        conf = rec["draft_confidence"].clone()
        self.assertEqual(odg.compared(rec, [(ids[t], logits[t], conf[t]) for t in range(2)]),
                         (0.0, 0.0, 0))
        ids[0, 1] = 0               # row 1 of step 0 differs: rows 0 and 1 compared, not row 2
        logits[0, 1, 2] += 0.5
        logits[0, 2, 0] += 9.0      # after the differing id: not compared
        conf[1, 2] -= 0.25
        worst_logit, worst_conf, differing = odg.compared(
            rec, [(ids[t], logits[t], conf[t]) for t in range(2)])
        self.assertAlmostEqual(worst_logit, 0.5, places=6)
        self.assertAlmostEqual(worst_conf, 0.25, places=6)
        self.assertEqual(differing, 1)


class Variants(unittest.TestCase):
    """Each variant computes the same function as the official operation it stands in for."""

    def test_blocked_gemm_modes(self):
        g = torch.Generator().manual_seed(2)
        a, b = torch.randn(3, 64, generator=g), torch.randn(5, 64, generator=g)
        a_s, b_s = torch.rand(3, 2, generator=g) + 0.5, torch.rand(5, 2, generator=g) + 0.5
        plain = sum((a[:, k * 32:(k + 1) * 32] @ b[:, k * 32:(k + 1) * 32].T)
                    * a_s[:, k:k + 1] * b_s[:, k][None] for k in range(2))
        for mode in ("fp64", "reverse"):
            torch.testing.assert_close(odg._blocked_gemm(a, a_s, b, b_s, 32, mode), plain)

    def test_dense_linear(self):
        g = torch.Generator().manual_seed(3)
        x, w = torch.randn(2, 3, 200, generator=g), torch.randn(7, 200, generator=g)
        want = torch.nn.functional.linear(x, w)
        for how in ("fp64", "reverse_k", "k_chunks"):
            got = odg.DenseLinear(torch.nn.functional, how).linear(x, w)
            self.assertEqual(got.dtype, x.dtype)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        xb, wb = x.bfloat16(), w.bfloat16()
        self.assertEqual(odg.DenseLinear(torch.nn.functional, "k_chunks").linear(xb, wb).dtype,
                         torch.bfloat16)

    def test_rotary(self):
        g = torch.Generator().manual_seed(4)
        angles = torch.outer(torch.arange(5).float(), torch.rand(8, generator=g))
        freqs = torch.polar(torch.ones_like(angles), angles)
        for shape in ((1, 5, 16), (1, 5, 3, 16)):
            for inverse in (False, True):
                x = torch.randn(*shape, generator=g)
                f = freqs.conj() if inverse else freqs
                f = f.view(1, 5, 8) if len(shape) == 3 else f.view(1, 5, 1, 8)
                want = torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * f)
                got = x.clone()
                odg.rotary_fp64(got, freqs, inverse)
                torch.testing.assert_close(got, want.flatten(-2), rtol=1e-5, atol=1e-6)

    def test_sinkhorn(self):
        g = torch.Generator().manual_seed(5)
        mixes, scale = torch.randn(3, 24, generator=g), torch.rand(3, generator=g)
        base = torch.randn(24, generator=g)
        pre, post, comb = odg.sinkhorn_fp64(mixes, scale, base)
        self.assertEqual((pre.dtype, pre.shape, comb.shape), (torch.float32, (3, 4), (3, 4, 4)))
        torch.testing.assert_close(comb.sum(-2), torch.ones(3, 4), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(pre, torch.sigmoid(mixes[:, :4] * scale[0] + base[:4]) + 1e-6)
        torch.testing.assert_close(post, 2 * torch.sigmoid(mixes[:, 4:8] * scale[1] + base[4:8]))

    def test_attention(self):
        """Against a plain softmax with the sink in the denominator (two 64-slot blocks, and
        -1 slots)."""
        g = torch.Generator().manual_seed(6)
        q = torch.randn(1, 2, 3, 16, generator=g).bfloat16()
        kv = torch.randn(1, 100, 16, generator=g).bfloat16()
        sink = torch.randn(3, generator=g)
        idx = torch.randint(0, 100, (1, 2, 90), generator=g).int()
        idx[0, 1, 40:] = -1
        got = odg.sparse_attn_fp64(q, kv, sink, idx, 0.25)
        for m in range(2):
            keys = kv[0, idx[0, m][idx[0, m] >= 0].long()].float()
            s = q[0, m].float() @ keys.T * 0.25
            p = torch.exp(s - s.amax(-1, keepdim=True))
            den = p.sum(-1) + torch.exp(sink - s.amax(-1))
            want = (p @ keys) / den[:, None]
            torch.testing.assert_close(got[0, m].float(), want, rtol=2e-2, atol=2e-2)


if __name__ == "__main__":
    unittest.main()
