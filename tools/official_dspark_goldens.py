#!/usr/bin/env python3
"""Goldens of the DSpark draft head made by the official DeepSeek-V4.1 code itself (issue 19).

    python3 tools/official_dspark_goldens.py --official DIR --model CKPT --out-dir OUT \
        [--threads 16] [--no-oracle]
    python3 tools/official_dspark_goldens.py --official DIR --check-source

DIR is the local copy of the official `inference/` folder (docs/goldens.md; imported as
tools/official_goldens.py does: model.py with the CPU kernel port kernel_cpu.py). CKPT is the
random checkpoint of assets/configs/test-dspark.json that `flashdesk-cli make-random --seed 3`
writes (tools/gpu/official_dspark.sh makes it), the one tests/engine/dspark_test_util.cpp
regenerates. Needs torch >= 2.9 (float8/float4 dtypes: the GPU machine's python3); runs on the
CPU in well under a minute. `--check-source` only reads DIR's model.py and says whether it has
everything this script calls (any python3).

The official code runs unchanged: this script builds its `Transformer` from the checkpoint
(official_goldens.build_model), calls `Transformer.forward` and `Transformer.forward_spec` as the
official `__main__` does, and reads what they return; forward pre-hooks on the target layers'
blocks record their input streams. Per case (a prompt longer than the 16-slot window and one
shorter):
  1. one official prefill of the prompt (start_pos 0) -> its target features `main_hidden`;
     `forward_spec(next, main_hidden, 0)` seeds every stage's window ring;
  2. S decode steps: the target's greedy token at position P + t through `forward` (start_pos
     P + t), then `forward_spec(next, main_hidden_row, P + t)`, which writes that row into the
     rings and drafts the block [next, noise x 4] at positions P + t + 1 ...: draft ids, the
     Markov-corrected logits and the confidence logits.
The noise band: the same head on the same features and tokens with only summation order,
precision or the transcendental functions changed, through the official modules with the
functions they call swapped (harness-side, nothing in the official files changes): the FP8/FP4
GEMMs summed exactly (FP64, rounded once); every dense `F.linear` (mHC mixes, gate, head, Markov
head, confidence, BF16 projections) exactly, over the reversed reduction axis or in 64-wide FP32
chunks; the attention's three FP32 sums (q.k, the block's probabilities, p.v) taken one term at
a time in ascending or descending order (a scalar kernel's loops; the official CPU port's order is
torch's einsum/sum, not its GPU kernel's); and in FP64: the attention's products and
exponentials, RMSNorm, the mHC collapse and expand, RoPE (cos/sin recomputed), Sinkhorn,
SiLU/softplus. The band is the largest change of
any of them over the rows a test compares (up to and including the first row whose draft id
changed). When tools/flashdesk_ref imports, the
oracle's head (exact and FP32 sums) is run on the same features for comparison (manifest only).

Writes OUT/official-every-role.safetensors (per case `<case>_*`: prompt ids, prompt features
[P, 3, D], step ids, step features [S, 3, D], the target layers' input streams [P + S, 3, hc, D],
draft inputs, draft ids [S, 5], logits [S, 5, V], confidence [S, 5]; noise_logits,
noise_confidence) and OUT/official-manifest.json (revision, file hashes, checkpoint SHA-256, the
noise runs, the oracle comparison). tests/engine/golden_dspark_official_test.cpp reads both from
tests/data/goldens/dspark/.
"""
import argparse
import ast
import hashlib
import json
import os
import platform
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import official_goldens as og  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 3  # make-random seed: tools/dspark_goldens.py and tests/engine/dspark_test_util.cpp
CONFIG = "assets/configs/test-dspark.json"
GOLDEN = "official-every-role.safetensors"
MANIFEST = "official-manifest.json"
# (name, prompt length, decode steps, numpy seed of the prompt ids): "long" is longer than the
# 16-slot window (the rings wrap before the first draft), "short" drafts with rings still filling
# (the official list min(W, start_pos + 1) shorter than W).
CASES = (("long", 37, 6, 5), ("short", 7, 4, 6))
PROMPT_IDS = (3, 500)  # below the image token id (500) and the noise id (510) of the config

# What this script calls in the official model.py: class -> methods -> their parameters.
OFFICIAL_API = {
    "Transformer": {"__init__": ["self", "args", "tokenizer"],
                    "forward": ["self", "input_ids", "start_pos", "images", "token_types"],
                    "forward_spec": ["self", "input_ids", "main_hidden", "start_pos"]},
    "DSparkBlock": {"forward": ["self", "x", "start_pos", "pre_mix", "main_x"],
                    "forward_embed": ["self", "main_hidden", "input_ids"],
                    "forward_head": ["self", "x", "pre_mix", "input_ids"]},
    "DSparkAttention": {"forward": ["self", "x", "start_pos", "main_x"]},
    "DSparkMarkovHead": {"forward": ["self", "token_ids"]},
    "DSparkConfidenceHead": {"forward": ["self", "hidden", "markov_embed"]},
    "Block": {"forward": ["self", "x", "start_pos", "pre_mix", "image_mask"]},
}
OFFICIAL_FUNCTIONS = ("linear", "fp8_gemm", "fp4_gemm", "F", "sample", "make_identity_pre_mix",
                      "get_dspark_topk_idxs")
OFFICIAL_ARGS = ("dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                 "dspark_markov_rank", "dspark_n_routed_experts", "dspark_n_activated_experts",
                 "n_mtp_layers", "temperature")


def official_api_problems(folder):
    """What this script needs from DIR/model.py and it lacks, read from the source (no import,
    any torch): missing classes, methods, parameters, functions or ModelArgs fields."""
    path = os.path.join(folder, "model.py")
    if not os.path.exists(path):
        return [f"{path} does not exist"]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    problems = []
    for cls, methods in OFFICIAL_API.items():
        if cls not in classes:
            problems.append(f"model.py has no class {cls}")
            continue
        defs = {n.name: n for n in classes[cls].body if isinstance(n, ast.FunctionDef)}
        for name, params in methods.items():
            if name not in defs:
                problems.append(f"{cls} has no method {name}")
                continue
            a = defs[name].args
            have = [p.arg for p in a.posonlyargs + a.args]
            if have[:len(params)] != params:
                problems.append(f"{cls}.{name}{tuple(have)} is not {cls}.{name}{tuple(params)}")
    for name in OFFICIAL_FUNCTIONS:
        if name not in functions and name not in imported:
            problems.append(f"model.py has no function {name}")
    if "ModelArgs" in classes:
        fields = {n.target.id for n in classes["ModelArgs"].body
                  if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        problems += [f"ModelArgs has no field {f}" for f in OFFICIAL_ARGS if f not in fields]
    else:
        problems.append("model.py has no class ModelArgs")
    return problems


def prompt_ids(length, seed):
    return [int(v) for v in np.random.default_rng(seed).integers(*PROMPT_IDS, size=length)]


class TargetInputs:
    """Forward pre-hooks on the target layers' blocks: their input streams h [L, hc, D] (after
    the Engram update, which the official forward applies before calling the block)."""

    def __init__(self, model, targets):
        self.targets, self.rows = list(targets), {}
        self.handles = [model.layers[i].register_forward_pre_hook(self._hook(i)) for i in targets]

    def _hook(self, layer):
        def pre(module, args):
            self.rows[layer] = args[0][0].clone()
        return pre

    def take(self):
        """[L, targets, hc, D] in target order; clears."""
        out = torch.stack([self.rows[i] for i in self.targets], dim=1)
        self.rows = {}
        return out


def reset_rings(model):
    for blk in model.mtp:
        blk.attn.window_kv_cache.zero_()


def run_case(M, model, args, prompt, steps, inputs):
    """One official prefill, then `steps` greedy decode steps each followed by forward_spec."""
    og.reset_state(M, model)
    P = len(prompt)
    out, _, main_hidden = model(torch.tensor([prompt]), 0)
    n_targets = len(args.dspark_target_layer_ids)
    if main_hidden is None or tuple(main_hidden.shape) != (1, P, n_targets * args.dim):
        raise SystemExit(f"official_dspark_goldens: forward returned main_hidden "
                         f"{None if main_hidden is None else tuple(main_hidden.shape)}, expected "
                         f"(1, {P}, {n_targets * args.dim})")
    shape = (n_targets, args.dim)
    rec = {"prompt_ids": torch.tensor(prompt),
           "prompt_features": main_hidden[0].unflatten(-1, shape).clone()}
    streams = [inputs.take()]
    if model.forward_spec(out, main_hidden, 0) is not None:
        raise SystemExit("official_dspark_goldens: forward_spec at start_pos 0 drafted")
    step_ids, step_features, last, ids, logits, conf = [], [], [], [], [], []
    B = args.dspark_block_size
    for t in range(steps):
        tok = int(out[0])
        out, _, main_hidden = model(torch.tensor([[tok]]), P + t)
        streams.append(inputs.take())
        result = model.forward_spec(out, main_hidden, P + t)
        if result is None:
            raise SystemExit(f"official_dspark_goldens: forward_spec at start_pos {P + t} "
                             "returned nothing")
        output_ids, draft_logits, confidence = result
        if tuple(output_ids.shape) != (1, B + 1) or int(output_ids[0, 0]) != int(out[0]):
            raise SystemExit(f"official_dspark_goldens: forward_spec returned ids "
                             f"{output_ids.tolist()} for input {out.tolist()}")
        step_ids.append(tok)
        step_features.append(main_hidden[0, 0].unflatten(-1, shape).clone())
        last.append(int(out[0]))
        ids.append(output_ids[0, 1:].clone())
        logits.append(draft_logits[0].float().clone())
        conf.append(confidence[0].float().clone())
    rec.update({"step_ids": torch.tensor(step_ids), "step_features": torch.stack(step_features),
                "target_inputs": torch.cat(streams), "draft_last": torch.tensor(last),
                "draft_ids": torch.stack(ids), "draft_logits": torch.stack(logits),
                "draft_confidence": torch.stack(conf)})
    return rec


def head_only(model, rec):
    """The head alone on recorded features and tokens: (ids, logits, confidence) per step."""
    reset_rings(model)
    P = len(rec["prompt_ids"])
    model.forward_spec(rec["draft_last"][:1], rec["prompt_features"].flatten(1)[None], 0)
    out = []
    for t in range(len(rec["step_ids"])):
        ids, logits, conf = model.forward_spec(rec["draft_last"][t:t + 1],
                                               rec["step_features"][t].flatten()[None, None],
                                               P + t)
        out.append((ids[0, 1:].clone(), logits[0].float().clone(), conf[0].float().clone()))
    return out


def compared(rec, runs):
    """Largest |logit| and |confidence| change of `runs` against the golden over the rows a test
    compares (up to and including the first row whose draft id differs) and the number of steps
    whose ids differ."""
    worst_logit, worst_conf, steps_differing = 0.0, 0.0, 0
    for t, (ids, logits, conf) in enumerate(runs):
        gold_ids = rec["draft_ids"][t]
        for i in range(len(gold_ids)):
            diff = (logits[i] - rec["draft_logits"][t, i]).abs().max().item()
            worst_logit = max(worst_logit, diff)
            worst_conf = max(worst_conf, abs(conf[i].item() - rec["draft_confidence"][t, i].item()))
            if int(ids[i]) != int(gold_ids[i]):
                steps_differing += 1
                break
    return worst_logit, worst_conf, steps_differing


# ---- the noise band: the official head with only summation order or precision changed ----------

def kernel_module(M):
    return sys.modules[M.fp8_gemm.__module__]


def _blocked_gemm(a, a_s, b, b_s, block, mode):
    """sum_k A_k B_k^T a_s_k b_s_k over K blocks of `block`: "fp64" sums every product exactly
    (FP64) and rounds once; "reverse" is the official kernel's FP32 block sum in reverse K order."""
    M_, K = a.shape
    n_blocks = K // block
    if mode == "fp64":
        sa = a_s.double().repeat_interleave(block, dim=1)
        sb = b_s.double().repeat_interleave(block, dim=1)
        return ((a.double() * sa) @ (b.double() * sb).T).float()
    acc = torch.zeros(M_, b.shape[0], dtype=torch.float32)
    for k in reversed(range(n_blocks)):
        sl = slice(k * block, (k + 1) * block)
        acc += (a[:, sl] @ b[:, sl].T) * a_s[:, k:k + 1] * b_s[:, k].unsqueeze(0)
    return acc


def gemm_variants(kmod, mode):
    """fp8_gemm / fp4_gemm with the official signatures and another summation of the same
    (exact) block products."""
    def fp8_gemm(a, a_s, b, b_s, scale_dtype=torch.float32, block_size=128):
        K = a.size(-1)
        M_, N = a.numel() // K, b.size(0)
        b_s_rows = b_s.float().repeat_interleave(block_size, dim=0)[:N]
        c = _blocked_gemm(a.reshape(M_, K).float(), a_s.reshape(M_, -1).float(), b.float(),
                          b_s_rows, block_size, mode)
        return c.to(torch.get_default_dtype()).view(*a.size()[:-1], N)

    def fp4_gemm(a, a_s, b, b_s, scale_dtype=torch.float32, act_block_size=128):
        K = a.size(-1)
        M_, N = a.numel() // K, b.size(0)
        a_s_32 = a_s.reshape(M_, -1).float().repeat_interleave(act_block_size // 32, dim=1)
        c = _blocked_gemm(a.reshape(M_, K).float(), a_s_32, kmod.unpack_fp4(b), b_s.float(), 32,
                          mode)
        return c.to(torch.get_default_dtype()).view(*a.size()[:-1], N)

    return {"fp8_gemm": fp8_gemm, "fp4_gemm": fp4_gemm}


class DenseLinear:
    """torch.nn.functional with `linear` (the dense FP32/BF16 products: mHC mixes, gate, head,
    Markov head, confidence, BF16 projections) summed another way, rounded to the input's dtype:
    "fp64" exactly, "reverse_k" over the reversed reduction axis, "k_chunks" as FP32 sums of
    64-wide chunks added in order, "row_by_row" one matrix-vector product per row."""

    def __init__(self, F, how):
        self._F, self._how = F, how

    def __getattr__(self, name):
        return getattr(self._F, name)

    def linear(self, x, w, bias=None):
        F, how = self._F, self._how
        if bias is not None or how == "fp64":
            y = F.linear(x.double(), w.double(), None if bias is None else bias.double())
        elif how == "reverse_k":
            y = F.linear(x.float().flip(-1), w.float().flip(-1))
        elif how == "k_chunks":
            xf, wf = x.float(), w.float()
            y = sum(F.linear(xf[..., k:k + 64], wf[:, k:k + 64])
                    for k in range(0, xf.shape[-1], 64))
        else:
            rows = x.float().reshape(-1, x.shape[-1])
            y = torch.stack([F.linear(r, w.float()) for r in rows]).reshape(*x.shape[:-1], -1)
        return y.to(x.dtype)


def listed_blocks(kv, topk_idxs):
    """The official kernel's walk over each query's key list: blocks of 64 listed slots, as
    (valid [b, m, k], the slots' keys in FP32 [b, m, k, d], 0 where the list says -1)."""
    b = kv.size(0)
    kvf = kv.float()
    batch = torch.arange(b).view(b, 1, 1)
    for t in range(0, topk_idxs.size(-1), 64):
        idxs = topk_idxs[:, :, t:t + 64].long()
        valid = idxs != -1
        yield valid, kvf[batch, idxs.clamp_min(0)] * valid.unsqueeze(-1)


def sparse_attn_fp64(q, kv, attn_sink, topk_idxs, softmax_scale):
    """The official kernel's attention (online softmax over blocks of 64 listed slots, BF16
    probabilities against the running maximum, the sink in the denominator) with its two
    products, q.k and p.v, summed in FP64 and its exponentials in FP64, rounded to FP32."""
    b, m, h, d = q.size()
    qf = q.double()
    acc = torch.zeros(b, m, h, d, dtype=torch.float32)
    total = torch.zeros(b, m, h, dtype=torch.float32)
    best = torch.full((b, m, h), -1e30, dtype=torch.float32)
    for valid, blk in listed_blocks(kv, topk_idxs):
        s = torch.einsum("bmhd,bmkd->bmhk", qf, blk.double()).float()
        s = torch.where(valid.unsqueeze(2), s, torch.tensor(-torch.inf)) * torch.tensor(
            softmax_scale, dtype=torch.float32)
        prev, best = best, torch.maximum(best, s.amax(dim=-1))
        scale = torch.exp((prev - best).double()).float()
        p = torch.exp((s - best.unsqueeze(-1)).double()).float()
        total = total * scale + p.sum(dim=-1)
        pv = torch.einsum("bmhk,bmkd->bmhd", p.to(torch.bfloat16).double(), blk.double()).float()
        acc = acc * scale.unsqueeze(-1) + pv
    total = total + torch.exp(attn_sink.float() - best)
    return (acc / total.unsqueeze(-1)).to(torch.bfloat16)


def sparse_attn_fp32_order(order):
    """The official kernel's attention (the same blocks of 64 listed slots, FP32 scores, torch's
    FP32 exponentials, BF16 probabilities against the running maximum, the sink added last) with
    its three FP32 sums taken one term at a time in another order: the q.k products over the head
    dimension, the probabilities of a block (the denominator) and the p.v products over the block's
    slots. order "sequential": ascending (a scalar kernel's loop); "reverse": descending. Each is
    as valid an FP32 evaluation as the official einsum/sum (whose order is torch's, and not the
    GPU kernel's); where an output lies within FP32 rounding of a BF16 midpoint, it flips."""
    def ordered(n):
        return range(n) if order == "sequential" else range(n - 1, -1, -1)

    def sparse_attn(q, kv, attn_sink, topk_idxs, softmax_scale):
        b, m, h, d = q.size()
        qf = q.float()
        scale = torch.tensor(softmax_scale, dtype=torch.float32)
        acc = torch.zeros(b, m, h, d, dtype=torch.float32)
        total = torch.zeros(b, m, h, dtype=torch.float32)
        best = torch.full((b, m, h), -1e30, dtype=torch.float32)
        for valid, blk in listed_blocks(kv, topk_idxs):                  # blk [b, m, k, d]
            n = blk.size(2)
            s = torch.zeros(b, m, h, n, dtype=torch.float32)
            for i in ordered(d):
                s = s + qf[..., i].unsqueeze(-1) * blk[:, :, None, :, i]
            s = torch.where(valid.unsqueeze(2), s, torch.tensor(-torch.inf)) * scale
            prev, best = best, torch.maximum(best, s.amax(dim=-1))
            rescale = torch.exp(prev - best)
            p = torch.exp(s - best.unsqueeze(-1))
            block_sum = torch.zeros(b, m, h, dtype=torch.float32)
            pv = torch.zeros(b, m, h, d, dtype=torch.float32)
            pb = p.to(torch.bfloat16).float()
            for k in ordered(n):
                block_sum = block_sum + p[..., k]
                pv = pv + pb[..., k].unsqueeze(-1) * blk[:, :, None, k, :]
            total = total * rescale + block_sum
            acc = acc * rescale.unsqueeze(-1) + pv
        total = total + torch.exp(attn_sink.float() - best)
        return (acc / total.unsqueeze(-1)).to(torch.bfloat16)

    return sparse_attn


def rms_norm_fp64(self, x):
    """RMSNorm.forward with the mean of squares and the scaling in FP64 (rounded to FP32)."""
    dtype = x.dtype
    xd = x.double()
    y = (xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + self.eps)).float()
    return (self.weight * y).to(dtype)


def hc_pre_fp64(self, x, pre_mix):
    """Block.hc_pre with the sum over the hc copies in FP64 (rounded to FP32, then as official)."""
    y = torch.sum(pre_mix.unsqueeze(-1).double() * x.double(), dim=2).float()
    return y.to(x.dtype)


def hc_post_fp64(self, x, residual, post, comb):
    """Block.hc_post with its products and sums in FP64 (rounded to FP32, then as official)."""
    y = post.unsqueeze(-1).double() * x.unsqueeze(-2).double() + torch.sum(
        comb.unsqueeze(-1).double() * residual.unsqueeze(-2).double(), dim=2)
    return y.float().type_as(x)


def rotary_fp64(x, freqs_cis, inverse=False):
    """apply_rotary_emb (in place, the official shapes) with cos/sin recomputed in FP64 from the
    table's angles and the rotation in FP64, rounded to FP32 before the store."""
    y = x
    pairs = x.double().unflatten(-1, (-1, 2))
    angle = torch.atan2(freqs_cis.imag.double(), freqs_cis.real.double())
    if inverse:
        angle = -angle
    n = pairs.size(1)
    angle = angle.view(1, n, pairs.size(-2)) if pairs.ndim == 4 else angle.view(
        1, n, 1, pairs.size(-2))
    c, s = torch.cos(angle), torch.sin(angle)
    a, b = pairs[..., 0], pairs[..., 1]
    y.copy_(torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2).float())
    return y


def sinkhorn_fp64(mixes, hc_scale, hc_base, hc_mult=4, sinkhorn_iters=20, eps=1e-6):
    """hc_split_sinkhorn's operations in FP64 (exp, sigmoid, sums), rounded to FP32 at the end."""
    h = hc_mult
    m, sc, base = mixes.double(), hc_scale.double(), hc_base.double()
    pre = torch.sigmoid(m[..., :h] * sc[0] + base[:h]) + eps
    post = 2 * torch.sigmoid(m[..., h:2 * h] * sc[1] + base[h:2 * h])
    comb = (m[..., 2 * h:] * sc[2] + base[2 * h:]).unflatten(-1, (h, h))
    comb = torch.exp(comb - comb.amax(dim=-1, keepdim=True))
    comb = comb / comb.sum(dim=-1, keepdim=True) + eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    for _ in range(sinkhorn_iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    return pre.float(), post.float(), comb.float()


class Activations:
    """torch.nn.functional with silu and softplus (expert gates, routing scores) in FP64."""

    def __init__(self, F):
        self._F = F

    def __getattr__(self, name):
        return getattr(self._F, name)

    def silu(self, x):
        return self._F.silu(x.double()).to(x.dtype)

    def softplus(self, x):
        return self._F.softplus(x.double()).to(x.dtype)


def variants(M):
    """{name: [(object, attribute, replacement), ...]}: each a way of summing the same values."""
    kmod = kernel_module(M)
    out = {"gemm_fp64": [(M, k, v) for k, v in gemm_variants(kmod, "fp64").items()]}
    for how in ("fp64", "reverse_k", "k_chunks"):
        out["dense_linear_" + how] = [(M, "F", DenseLinear(M.F, how))]
    out["attention_fp64"] = [(M, "sparse_attn", sparse_attn_fp64)]
    for order in ("sequential", "reverse"):
        out["attention_fp32_" + order] = [(M, "sparse_attn", sparse_attn_fp32_order(order))]
    out["rms_norm_fp64"] = [(M.RMSNorm, "forward", rms_norm_fp64)]
    out["hc_collapse_expand_fp64"] = [(M.Block, "hc_pre", hc_pre_fp64),
                                      (M.Block, "hc_post", hc_post_fp64)]
    out["rope_fp64"] = [(M, "apply_rotary_emb", rotary_fp64)]
    out["sinkhorn_fp64"] = [(M, "hc_split_sinkhorn", sinkhorn_fp64)]
    out["activations_fp64"] = [(M, "F", Activations(M.F))]
    return out


def patched(patch, fn):
    """fn() with the (object, attribute, value) replacements of `patch` in place."""
    saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in patch]
    try:
        for obj, attr, value in patch:
            setattr(obj, attr, value)
        return fn()
    finally:
        for obj, attr, value in saved:
            setattr(obj, attr, value)


# ---- our oracle on the same features (information only) -----------------------------------

def oracle_comparison(model_dir, recs):
    """tools/flashdesk_ref's head (exact and FP32 sums) seeded with the official features:
    {mode: (worst logit, worst confidence, steps with other ids)} or {"error": why}."""
    try:
        from flashdesk_ref.checkpoint import Checkpoint
        from flashdesk_ref.dspark import Draft
        from flashdesk_ref.model import Model
        from flashdesk_ref.ops import Rounding
    except Exception as e:  # noqa: BLE001 - information only
        return {"error": f"flashdesk_ref did not import: {e}"}
    out = {}
    try:
        ckpt = Checkpoint(model_dir)
        for mode, exact in (("oracle_exact_sums", True), ("oracle_fp32_sums", False)):
            draft = Draft(ckpt, Model(ckpt, rounding=Rounding(exact_sums=exact)))
            worst = [0.0, 0.0, 0]
            for rec in recs.values():
                rings = draft.new_rings()
                P = len(rec["prompt_ids"])
                draft.seed(rings, rec["prompt_features"].float().flatten(1), 0)
                runs = []
                for t in range(len(rec["step_ids"])):
                    draft.seed(rings, rec["step_features"][t].float().flatten()[None], P + t)
                    tokens, logits, conf = draft.draft(rings, P + t + 1, int(rec["draft_last"][t]))
                    runs.append((torch.tensor(tokens), logits.float(), conf.float()))
                w = compared(rec, runs)
                worst = [max(worst[0], w[0]), max(worst[1], w[1]), worst[2] + w[2]]
            out[mode] = worst
    except Exception as e:  # noqa: BLE001 - information only
        out["error"] = f"the oracle failed: {type(e).__name__}: {e}"
    return out


# ---- files -----------------------------------------------------------------------------------

def golden_tensors(recs, band):
    out = {}
    for case, rec in recs.items():
        for name, v in rec.items():
            key = f"{case}_{name}"
            if name in ("prompt_features", "step_features", "target_inputs"):
                bits = og.bf16_bits(v.float())
                if bits is None:
                    raise SystemExit(f"official_dspark_goldens: {key} is not bf16-valued")
                out[key] = bits
            elif v.dtype.is_floating_point:
                out[key] = v.float().numpy()
            else:
                out[key] = v.long().numpy()
    out["noise_logits"] = np.array([band[0]], dtype=np.float32)
    out["noise_confidence"] = np.array([band[1]], dtype=np.float32)
    return out


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official", required=True, help="folder with the official inference code")
    ap.add_argument("--model", help="checkpoint of assets/configs/test-dspark.json, make-random "
                                    f"--seed {SEED}")
    ap.add_argument("--out-dir", help="where the golden and the manifest go")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-oracle", action="store_true", help="skip the flashdesk_ref comparison")
    ap.add_argument("--check-source", action="store_true",
                    help="only check that the official model.py has what this script calls")
    a = ap.parse_args(argv)
    problems = official_api_problems(a.official)
    if problems:
        print("official_dspark_goldens: the official code lacks what this script calls:")
        for p in problems:
            print("  -", p)
        return 2
    if a.check_source:
        print(f"official_dspark_goldens: {a.official}/model.py has every class, method, "
              "function and ModelArgs field this script calls")
        return 0
    if not a.model or not a.out_dir:
        ap.error("--model and --out-dir are needed (unless --check-source)")
    if not hasattr(torch, "float8_e8m0fnu") or not hasattr(torch, "float4_e2m1fn_x2"):
        raise SystemExit(f"official_dspark_goldens: torch {torch.__version__} lacks the float8/"
                         "float4 dtypes the official code needs (torch >= 2.9)")
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.time()
    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config", cfg)
    if not text.get("dspark_block_size"):
        raise SystemExit(f"official_dspark_goldens: {a.model} has no DSpark stages")
    M = og.import_official(a.official)
    model, args, unused, note = og.build_model(M, cfg, a.model, 128)
    if len(model.mtp) != args.n_mtp_layers or not args.dspark_target_layer_ids:
        raise SystemExit(f"official_dspark_goldens: the official model built {len(model.mtp)} "
                         f"DSpark stages, the config has {args.n_mtp_layers}")
    # the writer adds a VL routing bias to every gate; the official Gate has one only with a
    # vision tower, and the stages never use it (drafts are text)
    unused_mtp = [n for n in unused if n.startswith("mtp.") and not n.endswith(".gate.bias_vl")]
    if unused_mtp:
        raise SystemExit(f"official_dspark_goldens: the official model left checkpoint tensors "
                         f"of the head unused: {unused_mtp}")
    inputs = TargetInputs(model, args.dspark_target_layer_ids)
    recs = {}
    for case, P, steps, seed in CASES:
        recs[case] = run_case(M, model, args, prompt_ids(P, seed), steps, inputs)
        print(f"official_dspark_goldens: {case}: prompt {P}, {steps} drafts, ids "
              f"{recs[case]['draft_ids'].tolist()} ({time.time() - t0:.1f} s)")

    # the head alone on the recorded features: first unchanged (must reproduce the golden), then
    # with each summation variant
    runs = {"replay": {}}
    for case, rec in recs.items():
        runs["replay"][case] = compared(rec, head_only(model, rec))
    for name, patch in variants(M).items():
        runs[name] = {case: patched(patch, lambda rec=rec: compared(rec, head_only(model, rec)))
                      for case, rec in recs.items()}
    table = {name: {"worst_logit": max(v[0] for v in r.values()),
                    "worst_confidence": max(v[1] for v in r.values()),
                    "steps_with_other_ids": sum(v[2] for v in r.values())}
             for name, r in runs.items()}
    replay = table.pop("replay")
    if replay["worst_logit"] or replay["worst_confidence"] or replay["steps_with_other_ids"]:
        print(f"official_dspark_goldens: warning: the head alone on the recorded features does not "
              f"reproduce the golden: {replay}")
    band = (max(v["worst_logit"] for v in table.values()),
            max(v["worst_confidence"] for v in table.values()))
    print("official_dspark_goldens: the official head with only its summation changed "
          "(largest change over the compared rows):")
    for name, v in table.items():
        print(f"  {name:20s} logits {v['worst_logit']:.4g}  confidence "
              f"{v['worst_confidence']:.4g}  steps with other ids {v['steps_with_other_ids']}")
    print(f"  noise band: logits {band[0]:.4g}, confidence {band[1]:.4g} "
          f"({time.time() - t0:.1f} s)")
    oracle = {} if a.no_oracle else oracle_comparison(a.model, recs)
    for name, v in oracle.items():
        print(f"  {name:20s} {v}")
    if oracle:
        print(f"  (oracle: {time.time() - t0:.1f} s)")

    os.makedirs(a.out_dir, exist_ok=True)
    meta = {"engine": "official DeepSeek-V4.1 reference " + og.REVISION[:8] + " (CPU kernels)",
            "config": CONFIG, "make_random_seed": SEED}
    og.write_safetensors(os.path.join(a.out_dir, GOLDEN), golden_tensors(recs, band), meta)
    manifest = {
        "made_by": f"tools/official_dspark_goldens.py (torch {torch.__version__}, "
                   f"{torch.get_num_threads()} threads, "
                   f"{platform.processor() or platform.machine()})",
        "official_revision": og.REVISION,
        "official_files_sha256": og.official_hashes(a.official),
        "config": CONFIG, "make_random_seed": SEED,
        "checkpoint_sha256": {n: file_sha256(os.path.join(a.model, n))
                              for n in sorted(os.listdir(a.model))
                              if n.endswith((".safetensors", ".json"))},
        "engram_token_map": note,
        "cases": {case: {"prompt": f"numpy default_rng({seed}).integers({PROMPT_IDS[0]}, "
                                   f"{PROMPT_IDS[1]}, {P})",
                         "prompt_len": P, "steps": steps}
                  for case, P, steps, seed in CASES},
        "semantics": "per step: Transformer.forward of the target's greedy token at start_pos "
                     "P + t, then Transformer.forward_spec(its output id, its main_hidden row, "
                     "P + t); the rings were seeded by forward_spec(.., prompt main_hidden, 0)",
        "noise_band": {"logits": band[0], "confidence": band[1], "runs": table},
        "replay_of_the_head_alone": replay,
        "oracle_on_the_official_features": oracle,
        "seconds": round(time.time() - t0, 1),
    }
    with open(os.path.join(a.out_dir, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"official_dspark_goldens: wrote {a.out_dir}/{GOLDEN} and {MANIFEST} in "
          f"{time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
