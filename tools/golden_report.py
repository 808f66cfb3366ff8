#!/usr/bin/env python3
"""Per-layer-role table of the engine against the PyTorch oracle, block by block (docs/goldens.md).

    /usr/bin/python3 tools/golden_report.py --cli build/release/bin/flashdesk-cli
        [--prompt-len 320] [--decode 24] [--backend cpu-reference] [--keep DIR] [--flash-tiny]

On the every-role checkpoint of tools/make_goldens.py (same writer, seed and prompt), for each
prefill mode: the oracle writes a --dump file (tools/ref_logits.py), the engine reruns every
block on the oracle's recorded input (`flashdesk-cli logits --block-inputs ... --dump`), and
tools/compare_logits.py's measures give each block's relative error RMS(engine - oracle) /
RMS(oracle_out - oracle_in) and the id match rates. The table shows the worst block of each
role. --flash-tiny: the same on the demo model with the 175-token prompt of
tests/data/goldens/flash-tiny/greedy.json (longer than its window, so bounded replay differs).
"all" pools a block's prefill and decode rows, as the C++ test does (one rounding flip moves a
row by ~2e-2, too much for a few decode rows alone). Exit status 1 when a block's pooled error
exceeds 5e-3 or an id match rate is below 0.98.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare_logits as cmp  # noqa: E402
import make_goldens  # noqa: E402
import ref_logits  # noqa: E402
from flashdesk_ref.config import FULL, REINDEX, REUSE, WINDOW, load_config  # noqa: E402

MODES = ("exact", "bounded")


def role_groups(cfg):
    """[(label, [layers])] in the order of the table; Engram layers also form their own row."""
    groups = {}
    for r in cfg.roles:
        if r.role == WINDOW:
            label = "window-only"
        elif r.role == FULL:
            label = f"Full r{r.ratio}" + ("+candidates" if r.builds_candidates else "")
        elif r.role == REINDEX:
            label = f"Reindex r{r.ratio}" + ("(candidates)" if r.candidate_source >= 0 else "")
        else:
            assert r.role == REUSE
            label = f"Reuse r{r.ratio}"
        groups.setdefault(label, []).append(r.layer)
        if r.engram:
            groups.setdefault("Engram layers", []).append(r.layer)
    order = ["window-only", "Full r2", "Reuse r2", "Full r1+candidates", "Reindex r1(candidates)",
             "Reindex r1", "Reuse r1", "Engram layers"]
    return sorted(groups.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99)


def run_mode(args, model, ids_path, mode, tmp):
    ref = os.path.join(tmp, f"ref-{mode}.safetensors")
    eng = os.path.join(tmp, f"eng-{mode}.safetensors")
    ref_logits.main(["--model", model, "--ids", ids_path, "--decode", str(args.decode),
                     "--prefill", mode, "--dump", "--out", ref])
    subprocess.run([args.cli, "logits", "--model", model, "--block-inputs", ref, "--prefill", mode,
                    "--dump", "--backend", args.backend, "--out", eng], check=True,
                   stdout=subprocess.DEVNULL)
    A, B = cmp.Dump(ref), cmp.Dump(eng)
    steps = cmp.comparable_decode_steps(A, B)
    return {"prefill": cmp.block_errors_prefill(A, B), "decode": cmp.block_errors_decode(A, B, steps),
            "all": pooled_errors(A, B, steps), "rates": cmp.id_rates(A, B, steps)}


def pooled_errors(A, B, steps):
    """[L] block errors over the prefill rows each block ran and the decode steps together (one
    rounding flip moves a row by ~2e-2, too much for a few decode rows alone; the C++ test pools
    the same way)."""
    out_a, out_b = A["prefill_block_out"], B["prefill_block_out"]
    L, P = out_a.shape[:2]
    run = cmp.positions_run(A, L, P) & cmp.positions_run(B, L, P)
    da, db = A["decode_block_out"][:steps], B["decode_block_out"][:steps]
    errs = []
    for l in range(L):
        prev = np.broadcast_to(A["prefill_embed"][:, None, :], out_a.shape[1:]) if l == 0 else out_a[l - 1]
        dprev = (np.broadcast_to(A["decode_embed"][:steps][:, :, None, :], da[:, 0].shape)
                 if l == 0 else da[:, l - 1])
        num = np.sum((out_b[l][run[l]] - out_a[l][run[l]]).astype(np.float64) ** 2)
        den = np.sum((out_a[l][run[l]] - prev[run[l]]).astype(np.float64) ** 2)
        num += np.sum((db[:, l] - da[:, l]).astype(np.float64) ** 2)
        den += np.sum((da[:, l] - dprev).astype(np.float64) ** 2)
        errs.append(float(np.sqrt(num / den)) if den > 0 else float("nan"))
    return errs


def layer_rate(rates, layer, kinds):
    """Pooled match rate of the id tensors of `layer` (prefill and decode)."""
    matched = rows = 0
    for (name, l), (rate, n) in rates.items():
        if l == layer and any(k in name for k in kinds):
            matched += rate * n
            rows += n
    return (matched / rows, rows) if rows else (None, 0)


def worst(values):
    values = [v for v in values if v is not None and not np.isnan(v)]
    return max(values) if values else None


def lowest(pairs):
    pairs = [(r, n) for r, n in pairs if r is not None]
    return min(r for r, _ in pairs) if pairs else None


def table(cfg, results):
    head = ("| role | layers | exact prefill | exact decode | exact all | bounded prefill | "
            "bounded decode | bounded all | experts | top-k |")
    lines = [head, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    failures = []
    for label, layers in role_groups(cfg):
        cells = []
        for mode in MODES:
            for phase in ("prefill", "decode", "all"):
                w = worst([results[mode][phase][l] for l in layers])
                cells.append("-" if w is None else f"{w:.2e}")
                if phase == "all" and w is not None and w > cmp.DEFAULTS["block"]:
                    failures.append(f"{label} {mode}: {w:.3e}")
        for kinds in (("expert_ids",), ("topk_idxs",)):
            r = lowest([layer_rate(results[m]["rates"], l, kinds) for m in MODES for l in layers])
            cells.append("-" if r is None else f"{r:.3f}")
            if r is not None and r < cmp.DEFAULTS["ids"]:
                failures.append(f"{label} {kinds[0]} match {r:.3f}")
        lines.append(f"| {label} | {','.join(map(str, layers))} | " + " | ".join(cells) + " |")
    return lines, failures


def every_role_inputs(args, tmp):
    model = os.path.join(tmp, "model")
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        make_goldens.make_every_role_checkpoint(args.cli, model)
    vocab = load_config(model).vocab_size
    return model, np.random.default_rng(make_goldens.SEED).integers(3, vocab, size=args.prompt_len).tolist()


def flash_tiny_inputs():
    root = make_goldens.ROOT
    with open(os.path.join(root, "tests/data/goldens/flash-tiny/greedy.json")) as f:
        cases = json.load(f)["cases"]
    return os.path.join(root, "assets/models/flash-tiny"), max(cases, key=lambda c: len(c["prompt_ids"]))["prompt_ids"]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Worst per-block error per layer role, engine vs oracle")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--prompt-len", type=int, default=make_goldens.PROMPT_LEN)
    ap.add_argument("--decode", type=int, default=24)
    ap.add_argument("--backend", default="cpu-reference")
    ap.add_argument("--keep", help="keep the checkpoint and dumps in this directory")
    ap.add_argument("--flash-tiny", action="store_true", help="the demo model instead")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        model, prompt = every_role_inputs(args, tmp) if not args.flash_tiny else flash_tiny_inputs()
        cfg = load_config(model)
        ids_path = os.path.join(tmp, "prompt.json")
        make_goldens.write_ids(ids_path, prompt)
        results = {mode: run_mode(args, model, ids_path, mode, tmp) for mode in MODES}
    lines, failures = table(cfg, results)
    print(f"{cfg.name}: engine backend {args.backend}; prompt {len(prompt)} ids, {args.decode} decode steps; "
          "worst block relative error per role, lowest id match rate (prefill + decode, both modes)")
    print("\n".join(lines))
    if failures:
        print("\nbeyond tolerance (block 5e-3, ids 0.98): " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
