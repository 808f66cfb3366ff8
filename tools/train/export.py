"""Export of a trained model to the checkpoint format the engine and the oracle load with no
conversion (docs/model-spec.md §2.2/§2.4, engine/checkpoint/tensor_spec.cpp): FP8 E4M3 weights with
F8_E8M0 32x32 tile scales for dense linears, packed E2M1 (I8, low nibble = even column) with
per-32 F8_E8M0 scales for routed experts, FP8 Engram tables with per-32 row scales, BF16 for
norms/embed/head/compressor/indexer wk and weights_proj/gate weight/vision, F32 for attn_sink,
gate biases and hc_*. The codes are those of the QAT forward (quant.py), so the exported model
computes what the trainer computed. Shards <= 15 MiB with model.safetensors.index.json, plus
config.json, the tokenizer files and engram_map.safetensors.
"""
import json
import os
import re
import shutil

import numpy as np
import torch
from flashdesk_ref.formats import f32_to_bf16_bits, f32_to_e2m1_codes, f32_to_e4m3_codes, pack_e2m1
from flashdesk_ref.safetensors import write_safetensors

from . import quant

SHARD_LIMIT = 15 * 1024 * 1024
FP8_LINEARS = re.compile(r"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|attn\.indexer\.wq_b|"
                         r"ffn\.shared_experts\.w[123]|engram\.wkv)\.weight$")
F32_NAMES = re.compile(r"(hc_(attn|ffn)_(fn|base|scale)|attn\.attn_sink|ffn\.gate\.bias(_vl)?)$")
EXPERTS = re.compile(r"^(layers\.\d+\.ffn)\.experts_(w[123])$")
ENGRAM_TABLE = re.compile(r"engram\.embed\.weight$")


def _bf16(t):
    return ("BF16", f32_to_bf16_bits(t.detach().float().cpu().numpy()))


def _fp8(name, w, block):
    q, codes = quant.fp8_weight_scale_codes(w.detach().float().cpu(), block)
    base = name[:-len(".weight")]
    return {name: ("F8_E4M3", f32_to_e4m3_codes(q.numpy())),
            base + ".scale": ("F8_E8M0", codes.numpy().astype(np.uint8))}


def _fp4(base, w):
    q, codes = quant.fp4_e8m0_scale_codes(w.detach().float().cpu(), 32)
    return {base + ".weight": ("I8", pack_e2m1(f32_to_e2m1_codes(q.numpy()))),
            base + ".scale": ("F8_E8M0", codes.numpy().astype(np.uint8))}


def _engram_table(name, w):
    q, codes = quant.act_quant_scale_codes(w.detach().float().cpu(), 32)
    base = name[:-len(".weight")]
    return {name: ("F8_E4M3", f32_to_e4m3_codes(q.numpy())),
            base + ".scale": ("F8_E8M0", codes.numpy().astype(np.uint8))}


def checkpoint_tensors(model, block=32):
    """{checkpoint name: (dtype string, stored numpy array)} of the model's state."""
    out = {}
    for name, t in model.state_dict().items():
        m = EXPERTS.match(name)
        if m:
            for e in range(t.shape[0]):
                out.update(_fp4(f"{m.group(1)}.experts.{e}.{m.group(2)}", t[e]))
        elif ENGRAM_TABLE.search(name):
            out.update(_engram_table(name, t))
        elif FP8_LINEARS.search(name):
            out.update(_fp8(name, t, block))
        elif F32_NAMES.search(name):
            out[name] = ("F32", t.detach().float().cpu().numpy())
        else:
            out[name] = _bf16(t)
    return out


def write_shards(out_dir, tensors, limit=SHARD_LIMIT):
    """model.safetensors when everything fits one file, else model-0000k-of-0000n shards and
    model.safetensors.index.json."""
    names = sorted(tensors)
    groups, cur, size = [], [], 0
    for n in names:
        b = tensors[n][1].nbytes
        if cur and size + b > limit - 65536:
            groups.append(cur)
            cur, size = [], 0
        cur.append(n)
        size += b
    groups.append(cur)
    if len(groups) == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})
        return
    weight_map, total = {}, 0
    for i, g in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(out_dir, fname), {n: tensors[n] for n in g}, {"format": "pt"})
        for n in g:
            weight_map[n] = fname
            total += tensors[n][1].nbytes
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def export_model(model, cfg, out_dir, tokenizer_dir=None, hasher=None):
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if old.startswith("model") and (old.endswith(".safetensors") or old.endswith(".json")):
            os.remove(os.path.join(out_dir, old))
    write_shards(out_dir, checkpoint_tensors(model, cfg.weight_block))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg.raw, f, indent=2)
        f.write("\n")
    if tokenizer_dir:
        for fname in ("tokenizer.json", "tokenizer_config.json"):
            src = os.path.join(tokenizer_dir, fname)
            if os.path.exists(src) and os.path.abspath(src) != os.path.abspath(os.path.join(out_dir, fname)):
                shutil.copyfile(src, os.path.join(out_dir, fname))
    if hasher is not None:
        write_safetensors(os.path.join(out_dir, "engram_map.safetensors"),
                          {"token_map": ("I64", hasher.token_map.cpu().numpy()),
                           "multipliers": ("I64", hasher.multipliers.cpu().numpy())})


def import_model(model, model_dir):
    """Loads an exported (or any) checkpoint directory into the trainer's model: dequantised
    values become the master weights (QAT re-quantises them to the same codes)."""
    from flashdesk_ref.checkpoint import Checkpoint
    ck = Checkpoint(model_dir)
    sd = model.state_dict()
    new = {}
    for name, t in sd.items():
        m = EXPERTS.match(name)
        if m:
            new[name] = torch.stack([ck[f"{m.group(1)}.experts.{e}.{m.group(2)}.weight"]
                                     for e in range(t.shape[0])])
        elif ENGRAM_TABLE.search(name):
            tab = ck.engram_tables[name[:-len(".weight")]]
            new[name] = tab.gather(torch.arange(tab.rows)).float()
        else:
            new[name] = ck[name].float().reshape(t.shape)
    model.load_state_dict(new)
    return ck
