"""Resume checkpoints.

Compact (travels to and from the GPU machine, each file <= 15 MiB): every parameter and MoE bias
in BF16 (FP32 for tensors below 64K elements and for hc_*, attn_sink and gate biases), optionally
AdamW moments as 8-bit blocks, and state.json (step, tokens, RNG seeds, phase, log rows).
Dropped by default: the AdamW moments (the run re-warms the learning rate after a resume) and the
FP32 low bits of large tensors.

Full (stays on the GPU machine between calls while it is warm): torch.save of FP32 weights and
the whole optimizer state; preferred when it is at least as recent as the compact one.
"""
import glob
import json
import os

import numpy as np
import torch

from flashdesk_ref.formats import bf16_bits_to_f32, f32_to_bf16_bits
from flashdesk_ref.safetensors import SafeTensorsFile, write_safetensors

FILE_LIMIT = 15 * 1024 * 1024
KEEP_F32 = ("hc_", "attn_sink", "gate.bias", "gate.bias_vl")


def _keep_f32(name, t):
    return t.numel() < 65536 or any(k in name for k in KEEP_F32)


def _encode(name, t):
    a = t.detach().float().cpu().numpy()
    return ("F32", a) if _keep_f32(name, t) else ("BF16", f32_to_bf16_bits(a))


def _q8_blocks(x, block=256):
    """int8 codes and FP32 per-block absmax scales of a flat FP32 array (zero padded)."""
    n = x.size
    pad = (-n) % block
    xb = np.pad(x.reshape(-1), (0, pad)).reshape(-1, block)
    scale = np.abs(xb).max(axis=1, keepdims=True) / 127.0
    codes = np.round(xb / np.where(scale > 0, scale, 1)).astype(np.int8)
    return codes.view(np.uint8), scale.astype(np.float32).reshape(-1)


def _dq8_blocks(codes, scale, shape):
    x = codes.view(np.int8).astype(np.float32) * scale.reshape(-1, 1)
    return x.reshape(-1)[:int(np.prod(shape))].reshape(shape)


def model_tensors(model):
    out = {}
    for name, t in model.state_dict().items():
        out[name] = _encode(name, t)
    return out


def moment_tensors(model, optimizer):
    """8-bit blocks of exp_avg and sqrt(exp_avg_sq) per parameter."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = {}
    for p, st in optimizer.state.items():
        if "exp_avg" not in st:
            continue
        n = names[id(p)]
        for key, arr in (("m", st["exp_avg"]), ("v", st["exp_avg_sq"].sqrt())):
            codes, scale = _q8_blocks(arr.float().cpu().numpy())
            out[f"opt.{key}.{n}"] = ("U8", codes)
            out[f"opt.{key}_scale.{n}"] = ("F32", scale)
    return out


def save_compact(directory, model, optimizer, state, with_moments=False):
    """Writes shards weights-NNN.safetensors (<= FILE_LIMIT each) and state.json."""
    os.makedirs(directory, exist_ok=True)
    for old in glob.glob(os.path.join(directory, "weights-*.safetensors")):
        os.remove(old)
    tensors = model_tensors(model)
    if with_moments:
        tensors.update(moment_tensors(model, optimizer))
        state = dict(state, optimizer_steps=_opt_steps(optimizer))
    shards, cur, size = [], {}, 0
    for name in sorted(tensors, key=lambda n: -tensors[n][1].nbytes):
        nbytes = tensors[name][1].nbytes
        if nbytes > FILE_LIMIT:
            raise ValueError(f"tensor {name} ({nbytes} B) exceeds the {FILE_LIMIT} B file limit")
        placed = False
        for shard in shards:
            if shard[1] + nbytes <= FILE_LIMIT - 4096:
                shard[0][name] = tensors[name]
                shard[1] += nbytes
                placed = True
                break
        if not placed:
            shards.append([{name: tensors[name]}, nbytes])
    for i, (shard, _) in enumerate(shards):
        write_safetensors(os.path.join(directory, f"weights-{i:03d}.safetensors"), shard)
    with open(os.path.join(directory, "state.json.tmp"), "w") as f:
        json.dump(state, f)
    os.replace(os.path.join(directory, "state.json.tmp"), os.path.join(directory, "state.json"))


def _opt_steps(optimizer):
    for st in optimizer.state.values():
        if "step" in st:
            return float(st["step"])
    return 0.0


def read_state(directory):
    path = os.path.join(directory, "state.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_compact(directory, model, optimizer=None):
    """Loads weights (and moments when present and an optimizer is given); returns
    (state, moments_restored)."""
    state = read_state(directory)
    stored = {}
    for path in sorted(glob.glob(os.path.join(directory, "weights-*.safetensors"))):
        f = SafeTensorsFile(path)
        for name in f.names():
            stored[name] = (f.dtype(name), f.get(name))
    sd = model.state_dict()
    missing = [n for n in sd if n not in stored]
    if missing:
        raise ValueError(f"{directory}: resume checkpoint lacks {missing[:5]}")
    new = {}
    for name, t in sd.items():
        dtype, arr = stored[name]
        arr = bf16_bits_to_f32(arr) if dtype == "BF16" else arr
        new[name] = torch.from_numpy(np.asarray(arr, np.float32).reshape(t.shape).copy())
    model.load_state_dict(new)
    restored = False
    if optimizer is not None and any(n.startswith("opt.m.") for n in stored):
        restored = _load_moments(stored, model, optimizer, state.get("optimizer_steps", 0.0))
    return state, restored


def _load_moments(stored, model, optimizer, steps):
    for name, p in model.named_parameters():
        if f"opt.m.{name}" not in stored:
            continue
        m = _dq8_blocks(stored[f"opt.m.{name}"][1], stored[f"opt.m_scale.{name}"][1], p.shape)
        v = _dq8_blocks(stored[f"opt.v.{name}"][1], stored[f"opt.v_scale.{name}"][1], p.shape)
        st = optimizer.state[p]
        st["exp_avg"] = torch.from_numpy(m).to(p.device)
        st["exp_avg_sq"] = torch.from_numpy(v).square().to(p.device)
        fused = bool(optimizer.defaults.get("fused"))
        st["step"] = torch.tensor(float(steps), device=p.device if fused else "cpu")
    return True


def save_full(path, model, optimizer, state):
    """torch.save of FP32 weights, optimizer state and `state`; its step also in PATH.json."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state},
               path + ".tmp")
    os.replace(path + ".tmp", path)
    with open(path + ".json", "w") as f:
        json.dump({"step": state["step"]}, f)


def full_step(path):
    """Step of a full state file, or -1 when there is none."""
    try:
        with open(path + ".json") as f:
            return int(json.load(f)["step"]) if os.path.exists(path) else -1
    except (OSError, ValueError, KeyError):
        return -1


def load_full(path, model, optimizer):
    try:
        blob = torch.load(path, map_location="cpu", weights_only=False)  # our own file
    except TypeError:  # torch < 1.13 has no weights_only
        blob = torch.load(path, map_location="cpu")
    model.load_state_dict(blob["model"])
    optimizer.load_state_dict(blob["optimizer"])
    return blob["state"]
