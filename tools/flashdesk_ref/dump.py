"""Collects per-block tensors during steps and assembles them into the names and shapes of
docs/logits-dump.md (prefix prefill_ / decode_)."""
import numpy as np

# per-layer tensors stacked over all main layers: name -> (numpy dtype, value of rows not run)
STACKED = {"block_out": (np.float32, 0), "block_pre_mix": (np.float32, 0),
           "attn_out": (np.float32, 0), "ffn_out": (np.float32, 0),
           "expert_ids": (np.int64, 0), "expert_weights": (np.float32, 0),
           "positions_run": (np.uint8, 0)}
# per-layer tensors written only for the layers that have them: name -> (dtype, fill)
PER_LAYER = {"engram_out": (np.float32, 0), "topk_idxs": (np.int64, -1),
             "candidates": (np.uint8, 0)}
GLOBAL = {"embed": np.float32, "engram_hash_ids": np.int64}


class Trace:
    """What one step computed, by (name, layer); rows start at row0 of the step."""

    def __init__(self, count):
        self.count = count
        self.data = {}

    def put(self, name, layer, tensor, row0=0):
        self.data[(name, layer)] = (row0, tensor.detach().clone())

    def rows(self, name, layer, dtype, fill):
        """numpy [count, ...] with the recorded rows in place and `fill` elsewhere."""
        row0, t = self.data[(name, layer)]
        out = np.full((self.count,) + tuple(t.shape[1:]), fill, dtype=dtype)
        out[row0:row0 + t.shape[0]] = t.cpu().numpy().astype(dtype)
        return out

    def layers_with(self, name):
        return sorted(l for (n, l) in self.data if n == name)


def step_tensors(trace, n_layers):
    """{name: numpy} for one step, without prefix; stacked tensors get a leading [L]."""
    out = {}
    for name, (dtype, fill) in STACKED.items():
        out[name] = np.stack([trace.rows(name, l, dtype, fill) for l in range(n_layers)])
    for name, (dtype, fill) in PER_LAYER.items():
        for l in trace.layers_with(name):
            out[f"{name}.layer{l}"] = trace.rows(name, l, dtype, fill)
    for name, dtype in GLOBAL.items():
        if (name, None) in trace.data:
            out[name] = trace.rows(name, None, dtype, 0)
    return out


def cache_tensors(state):
    """Dequantised caches of a sequence: compressed KV and index keys of KV sources, rings."""
    out = {}
    for l, src in state.sources.items():
        out[f"compress_kv.layer{l}"] = src.comp_kv.detach().cpu().numpy().astype(np.float32)
        out[f"index_k.layer{l}"] = src.index_k.detach().cpu().numpy().astype(np.float32)
    for l, cache in enumerate(state.layers):
        out[f"window_kv_cache.layer{l}"] = cache.kv.detach().cpu().numpy().astype(np.float32)
    return out


def decode_tensors(step_dicts, n_entries):
    """Stacks per-step dicts (each with P = 1) over T; candidates padded to the final entry
    count (n_entries: layer -> E_i after the last step)."""
    out = {}
    for name in step_dicts[0]:
        if name.startswith("positions_run"):
            continue
        rows = [d[name] for d in step_dicts]
        if name.startswith("candidates.layer"):
            e = n_entries[int(name.split("layer")[1])]
            rows = [np.pad(r, ((0, 0), (0, e - r.shape[1]))) for r in rows]
        out[name] = np.stack(rows)
    return out


def to_file_tensors(prefix, tensors):
    """{name: numpy} -> {prefix + name: (safetensors dtype, array)}."""
    kinds = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8"}
    return {prefix + k: (kinds[v.dtype], v) for k, v in tensors.items()}

