#!/usr/bin/env python3
"""Compares two logits/dump files of docs/logits-dump.md (numpy only, no torch).

    python3 tools/compare_logits.py A.safetensors B.safetensors [--config config.json]
        [--block-tol 5e-3] [--logits-tol 1e-2] [--id-match 0.98] [--hash-match 1.0]
        [--tolerances block=5e-3,logits=1e-2,ids=0.98,hash=1.0] [--all]

A is the reference. Per tensor: max abs error, relative RMS error RMS(B-A)/RMS(A), cosine and
(for logits) argmax agreement. Per block: RMS(B.block_out - A.block_out) / RMS(A.block_out -
A.block_in) (block_in = the previous block's output, or the embedding copied to the hc streams),
over the positions both files ran (prefill_positions_run). Id tensors: the share of rows whose
sets agree (expert ids, published top-k) or that are equal (candidates, Engram hash ids), per
layer in the table and pooled over all layers for the tolerance (candidates are reported only).
Greedy decode runs are compared up to the first step whose input ids differ.
Exit status: 0 within the tolerances, 1 beyond them, 2 when the files cannot be compared.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashdesk_ref.safetensors import FormatError, SafeTensorsFile, decode_float  # noqa: E402

DEFAULTS = {"block": 5e-3, "logits": 1e-2, "ids": 0.98, "hash": 1.0}


class Dump:
    """A loaded dump: name -> numpy array (floats as float32), plus metadata."""

    def __init__(self, path):
        f = SafeTensorsFile(path)
        self.path, self.metadata = path, f.metadata
        self.t = {}
        for name in f.names():
            dtype, stored = f.dtype(name), f.get(name)
            self.t[name] = decode_float(dtype, stored) if dtype in ("F32", "BF16", "F16") else np.array(stored)

    def __contains__(self, name):
        return name in self.t

    def __getitem__(self, name):
        return self.t[name]


# ---- measures ---------------------------------------------------------------------------------
def rms(x):
    x = np.asarray(x, dtype=np.float64)
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def tensor_stats(a, b):
    """max abs error, relative RMS error (vs a), cosine similarity."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.size == 0:
        return {"max_abs": 0.0, "rel_rms": 0.0, "cosine": 1.0}
    diff = b - a
    denom = rms(a)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return {"max_abs": float(np.abs(diff).max()),
            "rel_rms": rms(diff) / denom if denom > 0 else (0.0 if rms(diff) == 0 else float("inf")),
            "cosine": float(a @ b / (na * nb)) if na > 0 and nb > 0 else float(na == nb)}


def argmax_agreement(a, b):
    """Share of rows of [..., V] logits with the same argmax (lowest id on ties)."""
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float(np.mean(np.argmax(a2, -1) == np.argmax(b2, -1))) if a2.shape[0] else 1.0


def set_match_rows(a, b):
    """Per row of [..., k] id arrays: do the sets of valid (>= 0) ids agree? -> bool [rows]."""
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return np.array([set(x[x >= 0].tolist()) == set(y[y >= 0].tolist()) for x, y in zip(a2, b2)], dtype=bool)


def equal_rows(a, b):
    a2, b2 = a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)
    return np.all(a2 == b2, axis=1)


# ---- per-block errors -------------------------------------------------------------------------
def positions_run(d, n_layers, n_pos):
    if "prefill_positions_run" in d:
        return d["prefill_positions_run"].astype(bool)
    return np.ones((n_layers, n_pos), dtype=bool)


def block_errors_prefill(A, B):
    """[L] relative errors of prefill_block_out, over the rows both files ran."""
    out_a, out_b = A["prefill_block_out"], B["prefill_block_out"]
    L, P, hc = out_a.shape[:3]
    run = positions_run(A, L, P) & positions_run(B, L, P)
    errs = []
    for l in range(L):
        rows = run[l]
        prev = np.broadcast_to(A["prefill_embed"][:, None, :], out_a.shape[1:]) if l == 0 else out_a[l - 1]
        num = rms(out_b[l][rows] - out_a[l][rows])
        den = rms(out_a[l][rows] - prev[rows])
        errs.append(num / den if den > 0 else float("nan"))
    return errs


def block_errors_decode(A, B, steps):
    """[L] relative errors of decode_block_out over the first `steps` steps (block 0 needs
    decode_embed in A)."""
    out_a, out_b = A["decode_block_out"][:steps], B["decode_block_out"][:steps]
    L = out_a.shape[1]
    errs = []
    for l in range(L):
        if l == 0:
            if "decode_embed" not in A:
                errs.append(float("nan"))
                continue
            prev = np.broadcast_to(A["decode_embed"][:steps][:, :, None, :], out_a[:, 0].shape)
        else:
            prev = out_a[:, l - 1]
        den = rms(out_a[:, l] - prev)
        errs.append(rms(out_b[:, l] - out_a[:, l]) / den if den > 0 else float("nan"))
    return errs


# ---- the comparison ---------------------------------------------------------------------------
class Report:
    def __init__(self):
        self.lines, self.failures = [], []

    def add(self, line):
        self.lines.append(line)

    def check(self, ok, what):
        if not ok:
            self.failures.append(what)


def comparable_decode_steps(A, B):
    """Decode steps fed the same ids in both files (greedy runs diverge after a flip)."""
    if "decode_input_ids" not in A or "decode_input_ids" not in B:
        return 0
    a, b = A["decode_input_ids"], B["decode_input_ids"]
    n = min(len(a), len(b))
    diff = np.nonzero(a[:n] != b[:n])[0]
    return int(diff[0]) if diff.size else n


def compare_logits(A, B, tol, rep, steps):
    for name in ("prefill_logits", "decode_logits"):
        if name not in A or name not in B:
            continue
        a, b = A[name], B[name]
        if name == "decode_logits":
            if steps == 0:
                rep.add(f"{name:40s} no decode step with the same inputs to compare")
                continue
            a, b = a[:steps], b[:steps]
        if a.shape != b.shape:
            raise FormatError(f"{name}: shapes {a.shape} vs {b.shape}")
        s = tensor_stats(a, b)
        agree = argmax_agreement(a, b)
        rep.add(f"{name:40s} rel_rms {s['rel_rms']:.3e}  max_abs {s['max_abs']:.3e}  "
                f"cos {s['cosine']:.6f}  argmax {agree:.3f}")
        rep.check(s["rel_rms"] <= tol["logits"], f"{name}: relative RMS {s['rel_rms']:.3e} > {tol['logits']:.1e}")


def id_rates(A, B, steps):
    """{(kind, layer or None): (rate, rows)} for expert ids, top-k, candidates, hash ids."""
    rates = {}
    for prefix in ("prefill_", "decode_"):
        if prefix == "decode_" and steps == 0:
            continue
        name = prefix + "expert_ids"
        if name in A and name in B:
            a, b = A[name], B[name]
            if prefix == "decode_":
                a, b = np.swapaxes(a[:steps], 0, 1), np.swapaxes(b[:steps], 0, 1)  # [L, T, 1, k]
            L = a.shape[0]
            run = (positions_run(A, L, a.shape[1]) & positions_run(B, L, a.shape[1])
                   if prefix == "prefill_" else np.ones(a.shape[:2], bool))
            for l in range(L):
                m = set_match_rows(a[l][run[l]], b[l][run[l]]) if prefix == "prefill_" else set_match_rows(a[l], b[l])
                rates[(prefix + "expert_ids", l)] = (float(m.mean()) if m.size else 1.0, m.size)
        for name in sorted(A.t):
            if not name.startswith(prefix) or name not in B.t:
                continue
            kind = name[len(prefix):].split(".layer")[0]
            if kind not in ("topk_idxs", "candidates", "engram_hash_ids"):
                continue
            a, b = A[name], B[name]
            if prefix == "decode_":
                a, b = a[:steps], b[:steps]
            layer = int(name.split(".layer")[1]) if ".layer" in name else None
            rows = np.ones(a.shape[0], dtype=bool)
            if prefix == "prefill_" and layer is not None:
                L = A["prefill_block_out"].shape[0] if "prefill_block_out" in A else layer + 1
                rows = (positions_run(A, L, a.shape[0]) & positions_run(B, L, a.shape[0]))[layer]
            if a.shape != b.shape:
                raise FormatError(f"{name}: shapes {a.shape} vs {b.shape}")
            m = set_match_rows(a[rows], b[rows]) if kind == "topk_idxs" else equal_rows(a[rows], b[rows])
            rates[(name, layer)] = (float(m.mean()) if m.size else 1.0, int(m.size))
    return rates


def role_names(config_path):
    if not config_path:
        return {}
    from flashdesk_ref.config import Config
    import json
    with open(config_path, "r", encoding="utf-8") as f:
        cfg = Config(json.load(f), where=config_path)
    return {r.layer: r.role + (f"(m{r.ratio})" if r.ratio else "") + ("+engram" if r.engram else "")
            for r in cfg.roles}


def compare(A, B, tol, roles=None, show_all=False):
    rep = Report()
    roles = roles or {}
    for key in ("engine", "prefill_mode", "config_name"):
        rep.add(f"{key:14s} A: {A.metadata.get(key, '?')}   B: {B.metadata.get(key, '?')}")
    if "prompt_ids" in A and "prompt_ids" in B and not np.array_equal(A["prompt_ids"], B["prompt_ids"]):
        raise FormatError("the files were made from different prompts")
    steps = comparable_decode_steps(A, B)
    if "decode_input_ids" in A and steps < len(A["decode_input_ids"]):
        rep.add(f"note: decode inputs differ from step {steps} on; comparing the first {steps} steps")
    compare_logits(A, B, tol, rep, steps)

    pre = block_errors_prefill(A, B) if "prefill_block_out" in A and "prefill_block_out" in B else None
    dec = block_errors_decode(A, B, steps) if steps and "decode_block_out" in A and "decode_block_out" in B else None
    rates = id_rates(A, B, steps)
    if pre is not None or dec is not None:
        L = len(pre if pre is not None else dec)
        rep.add("")
        rep.add(f"{'block':>5} {'role':18s} {'prefill err':>12} {'decode err':>12} {'experts P':>10} "
                f"{'experts D':>10} {'topk P':>8} {'topk D':>8}")
        for l in range(L):
            cells = [fmt_err(pre[l] if pre else None), fmt_err(dec[l] if dec else None),
                     fmt_rate(rates.get(("prefill_expert_ids", l))), fmt_rate(rates.get(("decode_expert_ids", l))),
                     fmt_rate(rates.get((f"prefill_topk_idxs.layer{l}", l))),
                     fmt_rate(rates.get((f"decode_topk_idxs.layer{l}", l)))]
            rep.add(f"{l:>5} {roles.get(l, ''):18s} {cells[0]:>12} {cells[1]:>12} {cells[2]:>10} "
                    f"{cells[3]:>10} {cells[4]:>8} {cells[5]:>8}")
            for kind, errs in (("prefill", pre), ("decode", dec)):
                if errs is not None and not np.isnan(errs[l]):
                    rep.check(errs[l] <= tol["block"], f"block {l} {kind} relative error {errs[l]:.3e} > {tol['block']:.1e}")
    rep.add("")
    pooled = {}
    for (name, layer), (rate, rows) in sorted(rates.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        prefix, kind = name.split("_", 1)[0], name.split(".layer")[0].split("_", 1)[1]
        if kind != "expert_ids":
            rep.add(f"{name:40s} rows {rows:6d}  match {rate:.4f}")
        total = pooled.setdefault((prefix, kind), [0.0, 0])
        total[0] += rate * rows
        total[1] += rows
    for (prefix, kind), (matched, rows) in sorted(pooled.items()):
        rate = matched / rows if rows else 1.0
        if kind == "candidates":
            continue
        limit = tol["hash"] if kind == "engram_hash_ids" else tol["ids"]
        rep.add(f"{prefix + '_' + kind + ' (all layers)':40s} rows {rows:6d}  match {rate:.4f}")
        rep.check(rate >= limit - 1e-12, f"{prefix}_{kind} match rate {rate:.4f} < {limit}")
    for name in sorted(A.t):
        if name not in B.t or A[name].dtype != np.float32 or "logits" in name:
            continue
        is_cache = any(k in name for k in ("compress_kv", "index_k", "window_kv_cache"))
        if not (show_all or is_cache):
            continue
        a, b = A[name], B[name]
        if name.startswith("decode_") and not is_cache:
            a, b = a[:steps], b[:steps]
        if a.shape != b.shape:
            rep.add(f"{name:40s} shapes differ: {a.shape} vs {b.shape}")
            rep.check(False, f"{name}: shapes {a.shape} vs {b.shape}")
            continue
        s = tensor_stats(a, b)
        rep.add(f"{name:40s} rel_rms {s['rel_rms']:.3e}  max_abs {s['max_abs']:.3e}  cos {s['cosine']:.6f}")
    return rep


def fmt_err(e):
    return "-" if e is None else ("n/a" if np.isnan(e) else f"{e:.3e}")


def fmt_rate(r):
    return "-" if r is None else f"{r[0]:.3f}"


def parse_tolerances(args):
    tol = dict(DEFAULTS)
    if args.tolerances:
        for item in args.tolerances.split(","):
            key, _, value = item.partition("=")
            if key not in tol:
                raise SystemExit(f"compare_logits: unknown tolerance {key!r} (known: {', '.join(tol)})")
            tol[key] = float(value)
    for key, opt in (("block", args.block_tol), ("logits", args.logits_tol), ("ids", args.id_match),
                     ("hash", args.hash_match)):
        if opt is not None:
            tol[key] = opt
    return tol


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare two logits/dump files (docs/logits-dump.md)")
    ap.add_argument("a", help="reference file")
    ap.add_argument("b", help="file under test")
    ap.add_argument("--config", help="config.json: label blocks with their roles")
    ap.add_argument("--tolerances", help="block=5e-3,logits=1e-2,ids=0.98,hash=1.0")
    ap.add_argument("--block-tol", type=float, help="max per-block relative error (5e-3)")
    ap.add_argument("--logits-tol", type=float, help="max logits relative RMS error (1e-2)")
    ap.add_argument("--id-match", type=float, help="min expert / top-k id match rate (0.98)")
    ap.add_argument("--hash-match", type=float, help="min Engram hash id match rate (1.0)")
    ap.add_argument("--all", action="store_true", help="also list every float tensor")
    args = ap.parse_args(argv)
    tol = parse_tolerances(args)
    try:
        rep = compare(Dump(args.a), Dump(args.b), tol, role_names(args.config), args.all)
    except (FormatError, OSError, KeyError, ValueError) as e:
        print(f"compare_logits: cannot compare: {e}", file=sys.stderr)
        return 2
    print("\n".join(rep.lines))
    if rep.failures:
        print(f"\nFAIL ({len(rep.failures)} beyond tolerance):")
        for f in rep.failures:
            print("  " + f)
        return 1
    print("\nOK: within tolerances " + ", ".join(f"{k}={v:g}" for k, v in tol.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
