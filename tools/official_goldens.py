#!/usr/bin/env python3
"""Goldens made by the official DeepSeek-V4.1 reference code itself (issue 15).

    python3 tools/official_goldens.py --official DIR --model MODEL --ids IDS.json \
        [--image PNG --image-at N] [--decode 32] [--name NAME] --out-dir OUT

DIR is a local copy of the official `inference/` folder of DeepSeek-V4.1-Flash (HF revision
dba1be0a: model.py, engram.py, vision.py, image_processor.py and a CPU `kernel` module; a copy
that imports its siblings relatively, `from .engram import ...`, is imported as a package). Its
code is run as it is, never copied into this repository: this script only builds the model from a
checkpoint in the published layout (MODEL/config.json + *.safetensors, as `flashdesk-cli
make-random` writes them), feeds it, and records what its modules compute. It needs torch >= 2.9
(float8 / float4 dtypes; the GPU machine's python3) and runs on the CPU.

What it writes (OUT/NAME-*.safetensors, names of docs/logits-dump.md):
- blocks: one official prefill over the prompt plus the decode ids. Its first P rows are the
  `prefill_*` tensors, the next T rows the `decode_*` ones: decode goldens follow the official
  *prefill* semantics (issue 15: the official decode path publishes stale index keys on ratio-2
  sources, a defect we do not copy). With P >= sliding_window every row's window list is W slots
  wide, as in the engine.
- the decode-path comparison: the same tokens through the official decode path (prefill of P,
  then one token per step), per layer relative error against the prefill semantics and top-k
  agreement, printed and stored in OUT/NAME-decode-defect.json.
- OUT/NAME-manifest.json: the revision, SHA-256 of every official file used, torch version, CPU,
  the checkpoint's file hashes, the prompt.
The decode ids are the official decode path's greedy argmax (then teacher-forced everywhere).
"""
import argparse
import hashlib
import importlib
import json
import os
import platform
import struct
import sys
import time

import numpy as np
import torch

REVISION = "dba1be0a40aa45a94ad051997016db3960a90277"
OFFICIAL_FILES = ("model.py", "engram.py", "vision.py", "image_processor.py", "kernel_cpu.py",
                  "kernel.py", "config.json")

# ---- safetensors ---------------------------------------------------------------------------

ST_DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "I64": (torch.int64, 8),
             "I32": (torch.int32, 4), "U8": (torch.uint8, 1), "I8": (torch.uint8, 1),
             "F8_E4M3": (torch.uint8, 1), "F8_E8M0": (torch.uint8, 1), "BOOL": (torch.bool, 1)}


def read_safetensors(path):
    """{name: (dtype string, torch tensor)}; F8/I8 tensors come back as raw uint8 bytes."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base, out = 8 + n, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dt, size = ST_DTYPES[e["dtype"]]
        lo, hi = e["data_offsets"]
        raw = bytearray(blob[base + lo:base + hi])
        t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = (e["dtype"], t.reshape(e["shape"]))
    return out


def write_safetensors(path, tensors, metadata):
    """tensors: {name: numpy array}; F32, BF16 (given as uint16 bits, name in bf16_names),
    I64 and U8 arrays."""
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8",
             np.dtype(np.uint16): "BF16"}
    header, chunks, off = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        b = a.tobytes()
        header[name] = {"dtype": kinds[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for c in chunks:
            f.write(c)


def bf16_bits(t):
    """A float tensor holding bf16 values as uint16 bits, or None when that would lose bits."""
    b = t.to(torch.bfloat16)
    if not torch.equal(b.float(), t.float()):
        return None
    return b.view(torch.int16).numpy().view(np.uint16)


# ---- the official code ---------------------------------------------------------------------

def import_official(folder):
    """The official model module: as a package when its files import each other relatively."""
    folder = os.path.abspath(folder)
    with open(os.path.join(folder, "model.py"), encoding="utf-8") as f:
        relative = "from .engram import" in f.read()
    if relative:
        sys.path.insert(0, os.path.dirname(folder))
        return importlib.import_module(os.path.basename(folder) + ".model")
    sys.path.insert(0, folder)
    return importlib.import_module("model")


def official_hashes(folder):
    out = {}
    for name in OFFICIAL_FILES:
        p = os.path.join(folder, name)
        if os.path.exists(p):
            with open(p, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def model_args(M, cfg, max_seq_len):
    """The published (HF) config.json mapped onto the official ModelArgs (docs/model-spec.md §1.2)."""
    t = cfg.get("text_config", cfg)
    rope = t.get("rope_scaling") or {}
    q = cfg.get("quantization_config") or {}
    a = dict(max_batch_size=1, max_seq_len=max_seq_len, temperature=0.0,
             dtype="fp8" if q.get("quant_method", "fp8") == "fp8" else "bf16",
             expert_dtype=q.get("expert_dtype", "fp4"))
    rename = {"vocab_size": "vocab_size", "hidden_size": "dim",
              "moe_intermediate_size": "moe_inter_dim", "num_hidden_layers": "n_layers",
              "num_nextn_predict_layers": "n_mtp_layers", "num_attention_heads": "n_heads",
              "n_routed_experts": "n_routed_experts", "n_shared_experts": "n_shared_experts",
              "num_experts_per_tok": "n_activated_experts", "scoring_func": "score_func",
              "norm_topk_prob": "norm_topk_prob", "routed_scaling_factor": "route_scale",
              "swiglu_limit": "swiglu_limit", "q_lora_rank": "q_lora_rank",
              "head_dim": "head_dim", "qk_rope_head_dim": "rope_head_dim",
              "rms_norm_eps": "norm_eps", "o_groups": "o_groups", "o_lora_rank": "o_lora_rank",
              "sliding_window": "window_size", "compress_ratios": "compress_ratios",
              "kv_source_layer_ids": "kv_source_layers",
              "index_source_layer_ids": "index_source_layers",
              "compress_rope_theta": "compress_rope_theta", "rope_theta": "rope_theta",
              "index_n_heads": "index_n_heads", "index_head_dim": "index_head_dim",
              "index_topk": "index_topk", "candidate_source_layer_id": "candidate_source_layer",
              "candidate_topk_blocks": "candidate_topk_blocks",
              "candidate_block_size": "candidate_block_size", "hc_mult": "hc_mult",
              "hc_sinkhorn_iters": "hc_sinkhorn_iters", "hc_eps": "hc_eps",
              "engram_layer_ids": "engram_layer_ids",
              "engram_num_embeddings": "engram_num_embeddings",
              "engram_max_ngram_size": "engram_max_ngram_size",
              "engram_vocab_size": "engram_vocab_size", "engram_n_heads": "engram_n_heads",
              "engram_head_dim": "engram_head_dim", "engram_pad_token_id": "engram_pad_id",
              "engram_compressed_vocab_size": "engram_compressed_vocab_size",
              "dspark_block_size": "dspark_block_size",
              "dspark_noise_token_id": "dspark_noise_token_id",
              "dspark_target_layer_ids": "dspark_target_layer_ids",
              "dspark_markov_rank": "dspark_markov_rank",
              "dspark_n_routed_experts": "dspark_n_routed_experts",
              "dspark_num_experts_per_tok": "dspark_n_activated_experts", "gate_temp": "gate_temp"}
    for src, dst in rename.items():
        if src in t and t[src] is not None:
            v = t[src]
            a[dst] = tuple(v) if isinstance(v, list) else v
    if rope.get("rope_type", rope.get("type", "yarn")) == "yarn":
        a["original_seq_len"] = rope.get("original_max_position_embeddings", 0)
        a["rope_factor"] = rope.get("factor", 40)
        a["beta_fast"] = rope.get("beta_fast", 32)
        a["beta_slow"] = rope.get("beta_slow", 1)
    if "image_token_id" in cfg:
        a["image_token_id"] = cfg["image_token_id"]
    v = cfg.get("vision_config")
    if v:
        vmap = {"num_hidden_layers": "vision_n_layers", "hidden_size": "vision_dim",
                "num_attention_heads": "vision_n_heads", "intermediate_size": "vision_inter_dim",
                "patch_size": "vision_patch_size", "rope_theta": "vision_rope_theta",
                "downsample_ratio": "vision_downsample_ratio",
                "max_image_tokens": "vision_max_n_token", "min_pixels": "vision_min_pixels",
                "max_wh_ratio": "vision_max_wh_ratio"}
        for src, dst in vmap.items():
            if src in v:
                a[dst] = v[src]
    known = set(M.ModelArgs.__dataclass_fields__)
    return M.ModelArgs(**{k: v for k, v in a.items() if k in known})


class StubBackend:
    """A tokenizer whose single-token decodes reproduce a shipped Engram token map (random
    checkpoints have no tokenizer): token i decodes to 'tok<map[i]>', which the official
    normaliser leaves as it is, so the official map equals the shipped one."""

    def __init__(self, token_map):
        self.token_map = token_map

    def decode(self, ids, skip_special_tokens=False):
        return "tok%d" % self.token_map[ids[0]]

    def id_to_token(self, i):
        return "tok%d" % self.token_map[i]


class StubTokenizer:
    def __init__(self, token_map):
        self.backend_tokenizer = StubBackend(token_map)
        self.n = len(token_map)

    def __len__(self):
        return self.n


class JsonTokenizer:
    """tokenizer.json through the `tokenizers` library, as `len(tokenizer)` and
    `tokenizer.backend_tokenizer` of a transformers fast tokenizer see it."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        self.backend_tokenizer = Tokenizer.from_file(path)

    def __len__(self):
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)


def load_checkpoint(model_dir):
    tensors = {}
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors") and name.startswith("model"):
            tensors.update(read_safetensors(os.path.join(model_dir, name)))
    return tensors


def dequant_fp8_tiles(codes, scales, block=32):
    """FP8 E4M3 codes [out, in] with E8M0 tile scales -> float32 (exact)."""
    w = codes.view(torch.float8_e4m3fn).float()
    s = scales.view(torch.float8_e8m0fnu).float()
    s = s.repeat_interleave(block, 0)[:w.shape[0]].repeat_interleave(block, 1)[:, :w.shape[1]]
    return w * s


def load_weights(model, tensors):
    """Every parameter of the official model from the checkpoint, in the parameter's dtype: FP8,
    E8M0 and packed FP4 bytes reinterpreted, BF16 widened where the model keeps FP32, FP8 `wo_a`
    dequantised to BF16 (what the official convert.py does). Returns the unused tensor names."""
    used = set()
    params = dict(model.named_parameters())
    for name, p in params.items():
        if name not in tensors:
            raise SystemExit(f"official_goldens: the checkpoint has no tensor {name} "
                             f"({tuple(p.shape)} {p.dtype})")
        kind, t = tensors[name]
        used.add(name)
        if p.dtype in (torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2):
            want = {torch.float8_e4m3fn: ("F8_E4M3",), torch.float8_e8m0fnu: ("F8_E8M0",),
                    torch.float4_e2m1fn_x2: ("I8", "U8")}[p.dtype]
            if kind not in want:
                raise SystemExit(f"official_goldens: {name} is {kind}, expected {want}")
            value = t.contiguous().view(p.dtype)
        elif kind == "F8_E4M3":
            scale = name[:-len("weight")] + "scale"
            value = dequant_fp8_tiles(t, tensors[scale][1]).to(p.dtype)
            used.add(scale)
        else:
            value = t.to(p.dtype)
        if tuple(value.shape) != tuple(p.shape):
            raise SystemExit(f"official_goldens: {name} is {tuple(value.shape)} in the checkpoint, "
                             f"the official model wants {tuple(p.shape)}")
        p.data = value
    return sorted(set(tensors) - used)


def build_model(M, cfg, model_dir, max_len):
    """The official Transformer of the checkpoint in model_dir (config `cfg`), weights loaded, in
    eval mode, under torch's default dtype BF16 (as the official generate.py runs it). Engram
    models hash with the official token map: from tokenizer.json when the checkpoint has one and
    its compressed vocabulary has the config's size, else from the shipped engram_map through a
    stub tokenizer. Returns (model, ModelArgs, unused checkpoint tensor names, a note on the
    token map)."""
    torch.set_default_dtype(torch.bfloat16)
    torch.manual_seed(0)
    args = model_args(M, cfg, max_len)
    tok_path = os.path.join(model_dir, "tokenizer.json")
    tokenizer, tokenizer_note = None, "no Engram"
    if args.engram_layer_ids:
        if os.path.exists(tok_path):
            tokenizer = JsonTokenizer(tok_path)
        else:
            token_map = read_safetensors(os.path.join(model_dir, "engram_map.safetensors"))
            tokenizer = StubTokenizer(token_map["token_map"][1].tolist())
    try:
        model = M.Transformer(args, tokenizer)
        if tokenizer is not None:
            tokenizer_note = "official map from " + ("tokenizer.json" if isinstance(
                tokenizer, JsonTokenizer) else "the shipped engram_map (stub tokenizer)")
    except AssertionError as e:  # the official map's size disagrees with the config
        if not isinstance(tokenizer, JsonTokenizer):
            raise
        token_map = read_safetensors(os.path.join(model_dir, "engram_map.safetensors"))
        tokenizer = StubTokenizer(token_map["token_map"][1].tolist())
        tokenizer_note = (f"tokenizer.json gives a compressed vocabulary of {e} (official size, "
                          "config size): fell back to the shipped engram_map")
        print("official_goldens:", tokenizer_note)
        model = M.Transformer(args, tokenizer)
    unused = load_weights(model, load_checkpoint(model_dir))
    model.eval()
    return model, args, unused, tokenizer_note


# ---- recording what the official modules compute -------------------------------------------

class Recorder:
    """Forward hooks on the official modules (no change to their code): per layer the block's
    output and pre-mix, the Engram output, the attention and MoE outputs, the routing, the
    indexer's published top-k and candidates, q after RoPE, the raw and un-rotated attention
    output, the wo_a output, the mHC coefficients, each expert's output, compressor latents."""

    def __init__(self, M, model):
        self.M, self.model, self.r, self.handles = M, model, {}, []
        self.layer = None
        for i, blk in enumerate(model.layers):
            self._hook_block(i, blk)
        self.handles.append(model.embed.register_forward_hook(self._embed))
        if model.engram_hash is not None:
            self.handles.append(model.engram_hash.register_forward_hook(
                lambda m, a, out: self.r.__setitem__("engram_hash_ids", out.clone())))
        self.handles.append(model.norm.register_forward_pre_hook(
            lambda m, a: self.r.__setitem__("final_h", a[0].clone())))
        self._wrap_sparse_attn()

    def put(self, key, value):
        self.r.setdefault(key, {})[self.layer] = value

    def _hook_block(self, i, blk):
        def pre(m, args):
            self.layer = i
            self.put("block_in", args[0].clone())
            self.put("block_in_pre_mix", args[2].clone())

        def post(m, args, out):
            self.put("block_out", out[0].clone())
            self.put("block_pre_mix", out[1].clone())

        self.handles += [blk.register_forward_pre_hook(pre), blk.register_forward_hook(post)]
        self.handles.append(blk.attn.register_forward_hook(
            lambda m, a, out: self.put("attn_out", out.clone())))
        self.handles.append(blk.attn.wo_b.register_forward_pre_hook(
            lambda m, a: self.put("attn_wo_a", a[0].clone())))
        self.handles.append(blk.ffn.register_forward_hook(
            lambda m, a, out: self.put("ffn_out", out.clone())))
        self.handles.append(blk.ffn.gate.register_forward_hook(self._gate))
        self.handles.append(blk.ffn.shared_experts.register_forward_hook(
            lambda m, a, out: self.put("shared_out", out.clone())))
        for e, expert in enumerate(blk.ffn.experts):
            if expert is not None:
                self.handles.append(expert.register_forward_hook(self._expert(e)))
        if blk.engram is not None:
            self.handles.append(blk.engram.register_forward_hook(
                lambda m, a, out: self.r.setdefault("engram_out", {}).__setitem__(i, out.clone())))
        if blk.attn.compressor is not None:
            self.handles.append(blk.attn.compressor.register_forward_hook(
                lambda m, a, out: self.put("compress_latent",
                                           None if out is None else out.clone())))
        if blk.attn.indexer is not None:
            self.handles.append(blk.attn.indexer.register_forward_hook(self._indexer))
        original = blk.hc_mixes

        def mixes(x, fn, scale, base, _orig=original, _blk=blk):
            pre, post, comb = _orig(x, fn, scale, base)
            which = "hc_attn" if fn is _blk.hc_attn_fn else "hc_ffn"
            self.put(which + "_pre", pre.clone())
            self.put(which + "_post", post.clone())
            self.put(which + "_comb", comb.clone())
            return pre, post, comb

        blk.hc_mixes = mixes

    def _embed(self, m, args, out):
        self.r["embed_ref"] = out  # image rows are written into this tensor after the hook

    def _gate(self, m, args, out):
        weights, indices = out
        self.put("expert_weights", weights.clone())
        self.put("expert_ids", indices.clone())
        self.r.setdefault("_expert_calls", {})[self.layer] = {}

    def _expert(self, e):
        def hook(m, args, out):
            self.r["_expert_calls"][self.layer][e] = out.clone()
        return hook

    def _indexer(self, m, args, out):
        self.put("topk_raw", out.clone())
        if m.is_candidate_source:
            self.put("candidates", self.M.shared_attn.candidates.clone())

    def _wrap_sparse_attn(self):
        original = self.M.sparse_attn

        def recording(q, kv, sink, topk, scale):
            o = original(q, kv, sink, topk, scale)
            self.put("attn_q", q.clone())
            self.put("attn_list", topk.clone())
            self.put("attn_raw", o.clone())
            self.put("attn_unrot_ref", o)  # rotated back in place by the caller
            return o

        self.M.sparse_attn = recording



def expert_outputs(r, layer, n_rows):
    """[n_rows, k, D]: each routed expert's output for the row's k choices, in the order of
    expert_ids, from one forward's recording."""
    ids = r["expert_ids"][layer].reshape(n_rows, -1)
    calls = r["_expert_calls"][layer]
    d = r["shared_out"][layer].shape[-1]
    out = torch.zeros(n_rows, ids.shape[1], d, dtype=torch.float32)
    for e, y in calls.items():
        rows, slots = torch.where(ids == e)
        out[rows, slots] = y.float()
    return out


# ---- runs ----------------------------------------------------------------------------------

def image_inputs(IP, args, path, at, n_text):
    """The official preprocessing of one image placed at text position `at`: ImageInput,
    token types and the span length."""
    patches, vh, vw, lh, lw = IP.load_image({"url": path}, args)
    types = IP.image_token_types(lh, lw)
    return IP.ImageInput(at, patches, vh, vw, types), types


def build_input(IP, args, text_ids, image, image_at):
    """ids [1, L], token_types [1, L] or None, images or None, the image span (begin, end)."""
    if image is None:
        return torch.tensor([text_ids]), None, None, None
    img, types = image_inputs(IP, args, image, image_at, len(text_ids))
    n = types.numel()
    ids = text_ids[:image_at] + [args.image_token_id] * n + text_ids[image_at:]
    tt = [IP.TEXT] * image_at + types.tolist() + [IP.TEXT] * (len(text_ids) - image_at)
    return torch.tensor([ids]), torch.tensor([tt]), [[img]], (image_at, image_at + n)


def reset_state(M, model):
    """Zero every cache so a new sequence starts clean (the official code resets nothing)."""
    for name, b in model.named_buffers():
        if name.endswith(("kv_cache", "k_cache", "kv_state")):
            b.zero_()
        elif name.endswith("score_state"):
            b.fill_(-torch.inf)
    M.shared_attn.__init__()


def finish(r, logits):
    """Completes one forward's recording: the embedding rows as the blocks saw them (image rows
    are written into the embedding output after its hook ran), the attention output after the
    inverse RoPE (applied in place after the kernel returned) and the logits [rows, V]."""
    r["embed"] = r.pop("embed_ref")[0].clone()
    for layer, o in list(r.get("attn_unrot_ref", {}).items()):
        r.setdefault("attn_unrot", {})[layer] = o.clone()
    r.pop("attn_unrot_ref", None)
    r.pop("final_h", None)
    r["logits"] = logits.float()
    return r


def run_prefill(M, model, rec, ids, token_types, images):
    reset_state(M, model)
    rec.r = {}
    model(ids, 0, images=images, token_types=token_types)
    h = rec.r["final_h"]
    with torch.inference_mode():
        logits = model.head(model.norm(h), full_logits=True)[0]
    return finish(rec.r, logits)


def own_index_keys(M, model):
    """Hooks that make every KV source's indexer score against its own index keys in decode, as
    the official prefill does. The official decode path publishes a source's keys only on steps
    where its compressor completed a group, so on the other steps a ratio-2 source reads the keys
    the last publishing layer left in shared state (issue 15); these hooks undo that at run time,
    without changing the official code. Returns the handles (remove them to see the defect)."""
    def use_own(m, args):
        M.shared_attn.index_k = m.k_cache
    return [blk.attn.indexer.register_forward_pre_hook(use_own) for blk in model.layers
            if blk.attn.indexer is not None and blk.attn.indexer.owns_k]


def run_decode_path(M, model, rec, ids, token_types, images, P, decode_ids=None, steps=0,
                    fix_stale_keys=True):
    """The official generate loop: prefill P, then one token per step. Greedy when decode_ids is
    None. Returns (ids fed, the finished recording of every step)."""
    handles = own_index_keys(M, model) if fix_stale_keys else []
    try:
        reset_state(M, model)
        rec.r = {}
        tt = None if token_types is None else token_types[:, :P]
        _, logits, _ = model(ids[:, :P], 0, images=images, token_types=tt)
        fed, steps_rec = [], []
        nxt = int(logits[0].float().argmax())
        n = len(decode_ids) if decode_ids is not None else steps
        for t in range(n):
            tok = decode_ids[t] if decode_ids is not None else nxt
            fed.append(tok)
            rec.r = {}
            _, logits, _ = model(torch.tensor([[tok]]), P + t)
            steps_rec.append(finish(rec.r, logits[0:1]))
            nxt = int(logits[0].float().argmax())
    finally:
        for h in handles:
            h.remove()
    return fed, steps_rec


def layer_stack(rec_r, key, n_layers, rows):
    vals = [rec_r[key][i][0][rows].float() for i in range(n_layers)]
    return torch.stack(vals)


# recorded key -> whether the official tensor carries the batch dimension [1, L, ...]
BATCHED = {"block_out": True, "block_pre_mix": True, "attn_out": True, "ffn_out": True,
           "expert_weights": False, "attn_q": True, "attn_raw": True, "attn_unrot": True,
           "attn_wo_a": True, "shared_out": False, "hc_attn_pre": True, "hc_attn_post": True,
           "hc_attn_comb": True, "hc_ffn_pre": True, "hc_ffn_post": True, "hc_ffn_comb": True}


def per_layer(r, key, n_layers):
    """[n_layers, L, ...] float32 of a recorded per-layer tensor."""
    return torch.stack([(r[key][i][0] if BATCHED[key] else r[key][i]).float()
                        for i in range(n_layers)])


def rows_of(args, rec, r, rows, L, n_layers, offset=None):
    """What one official prefill of L rows computed for `rows`, as per-layer [n_layers, n, ...]
    tensors and per-row [n, ...] tensors keyed by their docs/logits-dump.md kind."""
    layers, per_row = {}, {}
    for key in BATCHED:
        if key in r:
            layers[key] = per_layer(r, key, n_layers)[:, rows]
    layers["expert_ids"] = torch.stack([r["expert_ids"][i].reshape(L, -1)
                                        for i in range(n_layers)]).long()[:, rows]
    layers["expert_out"] = torch.stack([expert_outputs(r, i, L) for i in range(n_layers)])[:, rows]
    per_row["embed"] = r["embed"].float()[rows]
    for i, v in r.get("engram_out", {}).items():
        per_row[f"engram_out.layer{i}"] = v[0, rows].float()
    if "engram_hash_ids" in r:
        per_row["engram_hash_ids"] = r["engram_hash_ids"][0].long()[rows]
    for i, t in r.get("topk_raw", {}).items():
        raw = t[0].long()[rows]
        off = L if offset is None else offset  # the window list's width before the entries
        per_row[f"topk_entries.layer{i}"] = torch.where(raw >= 0, raw - off, -1)  # entry ids
    for i, c in r.get("candidates", {}).items():
        per_row[f"candidates.layer{i}"] = c[0, rows].to(torch.uint8)
    per_row["logits"] = r["logits"][rows]
    return layers, per_row


def prefill_tensors(layers, per_row, P, n_layers):
    out = {"prefill_" + k: v for k, v in layers.items()}
    for k, v in per_row.items():
        if k.startswith("topk_entries"):
            layer = k.split(".")[1]
            out[f"prefill_topk_idxs.{layer}"] = torch.where(v >= 0, v + P, -1)
        elif k == "logits":
            out["prefill_logits"] = v[-1:]
        else:
            out["prefill_" + k] = v
    out["prefill_positions_run"] = torch.ones(n_layers, P, dtype=torch.uint8)
    return out


def decode_tensors(steps, W, final_entries):
    """steps: one (layers, per_row) pair per decode step, each for its single last row."""
    out = {}
    for k in steps[0][0]:
        out["decode_" + k] = torch.stack([s[0][k] for s in steps])  # [T, n_layers, 1, ...]
    for k in steps[0][1]:
        vals = [s[1][k] for s in steps]
        if k.startswith("topk_entries"):
            layer = k.split(".")[1]
            width = max(v.shape[-1] for v in vals)  # K = min(index_topk, entries) can grow
            out[f"decode_topk_idxs.{layer}"] = torch.stack(
                [torch.nn.functional.pad(torch.where(v >= 0, v + W, -1), (0, width - v.shape[-1]),
                                         value=-1) for v in vals])
        elif k.startswith("candidates"):
            width = final_entries[int(k.split("layer")[1])]
            out["decode_" + k] = torch.stack(
                [torch.nn.functional.pad(v, (0, width - v.shape[-1])) for v in vals])
        elif k == "logits":
            out["decode_logits"] = torch.cat(vals)
            out["decode_argmax"] = out["decode_logits"].argmax(-1)
        else:
            out["decode_" + k] = torch.stack(vals)
    return out


def final_caches(model, args, L):
    """The caches after the last row: compressed entries and index keys of every KV source and
    every layer's window ring (slot = position mod W), as the engine dumps them (decode_*)."""
    out = {}
    for i, blk in enumerate(model.layers):
        a = blk.attn
        out[f"decode_window_kv_cache.layer{i}"] = a.window_kv_cache[0].float().clone()
        if a.is_kv_source:
            n = L // a.compress_ratio
            out[f"decode_compress_kv.layer{i}"] = a.compress_kv_cache[0, :n].float().clone()
            if a.indexer is not None and a.indexer.owns_k:
                out[f"decode_index_k.layer{i}"] = a.indexer.k_cache[0, :n].float().clone()
    return out


# bf16-valued by the official dtype flow: stored as BF16 (lossless, checked) to halve the files
BF16_KINDS = ("embed", "block_out", "attn_out", "ffn_out", "attn_q", "attn_raw", "attn_unrot",
              "attn_wo_a", "expert_out", "shared_out", "engram_out", "compress_kv", "index_k",
              "window_kv_cache", "compress_latent")


def numpy_tensors(t):
    out = {}
    for name, v in t.items():
        kind = name.split("_", 1)[1].split(".layer")[0] if "_" in name else name
        if v.dtype in (torch.float32, torch.float64, torch.bfloat16):
            v = v.float()
            bits = bf16_bits(v) if kind in BF16_KINDS else None
            if kind in BF16_KINDS and bits is None:
                print(f"official_goldens: {name} is not bf16-valued; kept as F32")
            out[name] = bits if bits is not None else v.numpy()
        elif v.dtype == torch.uint8 or v.dtype == torch.bool:
            out[name] = v.to(torch.uint8).numpy()
        else:
            out[name] = v.long().numpy()
    return out


def rel_err(a, b, base):
    """RMS(a - b) / RMS(b - base): a block's error over the size of its update."""
    num = (a.float() - b.float()).pow(2).mean().sqrt()
    den = (b.float() - base.float()).pow(2).mean().sqrt()
    return float(num / den) if den > 0 else float(num)


def block_error(a, b, base):
    """Squared RMS of (a - b) over the squared RMS of b's update over its input."""
    return float((a - b).pow(2).mean()) / max(float((b - base).pow(2).mean()), 1e-30)


def decode_defect(steps, defective, long_run, P, n_layers, W):
    """Per layer, against the decode goldens (decode path, own index keys): the unchanged
    official decode path (stale keys on ratio-2 sources) and one long official prefill of the same
    ids - block output error over its update (free-running: each feeds its own layers) and rows
    whose published top-k is the same set."""
    def topk_set(t, off):
        return set(int(v) - off for v in t.tolist() if v >= 0)

    table = []
    for i in range(n_layers):
        e_def, e_long, same_def, same_long, total = [], [], 0, 0, 0
        for t, (g, d) in enumerate(zip(steps, defective)):
            want = g["block_out"][i][0, 0].float()
            base = g["block_in"][i][0, 0].float()
            e_def.append(block_error(d["block_out"][i][0, 0].float(), want, base))
            e_long.append(block_error(long_run["block_out"][i][0, P + t].float(), want, base))
            if i in g.get("topk_raw", {}):
                ref = topk_set(g["topk_raw"][i][0, 0], W)
                same_def += topk_set(d["topk_raw"][i][0, 0], W) == ref
                same_long += topk_set(long_run["topk_raw"][i][0, P + t], P + len(steps)) == ref
                total += 1
        table.append({"layer": i, "defective_decode_rel_err": float(np.sqrt(np.mean(e_def))),
                      "long_prefill_rel_err": float(np.sqrt(np.mean(e_long))),
                      "defective_topk_rows_equal": f"{same_def}/{total}" if total else "-",
                      "long_prefill_topk_rows_equal": f"{same_long}/{total}" if total else "-"})
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--official", required=True, help="folder with the official inference code")
    ap.add_argument("--model", required=True, help="checkpoint directory (published layout)")
    ap.add_argument("--ids", required=True, help="JSON list of prompt token ids (text only)")
    ap.add_argument("--image", help="an image placed in the prompt")
    ap.add_argument("--image-at", type=int, default=0, help="text position of the image")
    ap.add_argument("--decode", type=int, default=32, help="greedy decode steps")
    ap.add_argument("--name", default="golden")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--threads", type=int, default=0)
    args_cli = ap.parse_args(argv)
    if args_cli.threads:
        torch.set_num_threads(args_cli.threads)
    t0 = time.time()
    M = import_official(args_cli.official)
    IP = sys.modules[M.__name__.rsplit(".", 1)[0] + ".image_processor"] if "." in M.__name__ \
        else importlib.import_module("image_processor")
    with open(os.path.join(args_cli.model, "config.json")) as f:
        cfg = json.load(f)
    with open(args_cli.ids) as f:
        text_ids = [int(v) for v in json.load(f)]
    max_len = len(text_ids) + args_cli.decode + 2048
    model, args, unused, tokenizer_note = build_model(M, cfg, args_cli.model, max_len)
    rec = Recorder(M, model)
    n_layers, W = args.n_layers, args.window_size

    ids, token_types, images, span = build_input(IP, args, text_ids, args_cli.image,
                                                 args_cli.image_at)
    P = ids.shape[1]
    # prefill goldens: one official prefill of the prompt
    r = run_prefill(M, model, rec, ids, token_types, images)
    blocks = prefill_tensors(*rows_of(args, rec, r, slice(0, P), P, n_layers), P, n_layers)
    blocks.update({k.replace("decode_", "prefill_"): v
                   for k, v in final_caches(model, args, P).items()})
    # decode goldens: the official decode path with every KV source reading its own index keys
    # (the prefill semantics; see own_index_keys), greedy
    fed, steps = run_decode_path(M, model, rec, ids, token_types, images, P, steps=args_cli.decode)
    T = len(fed)
    if T:
        rows = [rows_of(args, rec, s, slice(0, 1), 1, n_layers, offset=W) for s in steps]
        final_entries = {i: (P + T) // args.compress_ratios[i] for i in range(n_layers)
                         if args.compress_ratios[i]}
        blocks.update(decode_tensors(rows, W, final_entries))
        blocks.update(final_caches(model, args, P + T))
    # the defect, and the long prefill: the same ids through the unchanged official decode path,
    # and one official prefill over prompt + decode ids
    _, defective = run_decode_path(M, model, rec, ids, token_types, images, P, decode_ids=fed,
                                   fix_stale_keys=False)
    full_ids = torch.cat([ids, torch.tensor([fed], dtype=torch.long)], dim=1)
    full_tt = None if token_types is None else torch.cat(
        [token_types, torch.full((1, T), IP.TEXT)], dim=1)
    long_run = run_prefill(M, model, rec, full_ids, full_tt, images)
    if span is not None:
        blocks["image_spans"] = torch.tensor([list(span)], dtype=torch.long)
    blocks["prompt_ids"] = ids[0].long()
    blocks["decode_input_ids"] = torch.tensor(fed, dtype=torch.long)
    blocks["decode_positions"] = torch.arange(P, P + T, dtype=torch.long)
    if images is not None:
        with torch.inference_mode():
            img = images[0][0]
            feats = model.encode_image(img.patches, img.n_vit_h, img.n_vit_w)
        blocks["image_features"] = feats.float()
    meta = {"engine": "official DeepSeek-V4.1 reference " + REVISION[:8] + " (CPU kernels)",
            "prefill_mode": "exact", "config_name": cfg.get("name", "model"),
            "all_positions": "false",
            "semantics": "prefill: official prefill of the prompt; decode: official decode path "
                         "with each KV source reading its own index keys"}
    os.makedirs(args_cli.out_dir, exist_ok=True)
    # the finer intermediates go to their own file (diagnosis; the tests read the blocks file)
    diag_kinds = ("attn_q", "attn_raw", "attn_unrot", "attn_wo_a", "expert_out", "shared_out",
                  "hc_attn_pre", "hc_attn_post", "hc_attn_comb", "hc_ffn_pre", "hc_ffn_post",
                  "hc_ffn_comb")
    diag = {k: v for k, v in blocks.items() if k.split("_", 1)[-1].split(".layer")[0] in diag_kinds}
    for k in diag:
        del blocks[k]
    for k in ("prompt_ids", "decode_input_ids"):
        diag[k] = blocks[k]
    write_safetensors(os.path.join(args_cli.out_dir, f"{args_cli.name}-blocks.safetensors"),
                      numpy_tensors(blocks), meta)
    write_safetensors(os.path.join(args_cli.out_dir, f"{args_cli.name}-diag.safetensors"),
                      numpy_tensors(diag), meta)
    defect = decode_defect(steps, defective, long_run, P, n_layers, W)
    with open(os.path.join(args_cli.out_dir, f"{args_cli.name}-decode-defect.json"), "w") as f:
        json.dump(defect, f, indent=1)
    print("decode rows against the decode goldens (official decode path, own index keys):")
    print("  layer  official decode (stale keys)   one long official prefill")
    for row in defect:
        print(f"  {row['layer']:5d}  {row['defective_decode_rel_err']:.3e}  top-k "
              f"{row['defective_topk_rows_equal']:>6}   {row['long_prefill_rel_err']:.3e}  top-k "
              f"{row['long_prefill_topk_rows_equal']:>6}")
    manifest = {"revision": REVISION, "official_files_sha256": official_hashes(args_cli.official),
                "torch": torch.__version__, "python": platform.python_version(),
                "cpu": platform.processor() or platform.machine(),
                "threads": torch.get_num_threads(), "model": os.path.basename(
                    os.path.abspath(args_cli.model)),
                "checkpoint_sha256": {n: hashlib.sha256(open(os.path.join(args_cli.model, n),
                                                             "rb").read()).hexdigest()
                                      for n in sorted(os.listdir(args_cli.model))
                                      if n.endswith((".safetensors", ".json"))},
                "unused_checkpoint_tensors": unused, "engram_token_map": tokenizer_note, "prompt_len": P, "decode_steps": T,
                "image_span": list(span) if span else None, "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(args_cli.out_dir, f"{args_cli.name}-manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"official_goldens: {args_cli.name}: P={P} T={T} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
