#!/usr/bin/env python3
"""How far summation order alone moves each block of an official golden: the PyTorch oracle
(tools/ref_logits.py) fed the golden's block inputs twice, once with correctly rounded sums (which the
engine's fixed FP32 orders approximate) and once with FP32 sums in torch's order (`--fp32-sums`, as the official code adds
up), exact prefill and the golden's teacher-forced decode ids; each block's error between the two
runs, by the test's measure (tools/compare_logits.py), for the prefill rows and the decode rows.
Written into the golden's manifest case as `order_noise`, which GoldenOfficial
(tests/engine/golden_official_test.cpp) reads: a block may differ from the official one by
kOrderNoiseFactor times this noise where that is more than its fixed bound.

    /usr/bin/python3 tools/official_order_noise.py [--case flash-tiny]
        [--model assets/models/flash-tiny] [--goldens tests/data/goldens/official]

Why: the 2143-step flash-tiny's block 3 (2026-12-07) differs from the official one by 9.7e-3
(bound 5e-3) with every id equal; the oracle with torch's order gives the official block bit for
bit and the one with correctly rounded sums differs as the engine does (tools/train/README.md,
"Run s"). Run after tools/update_official_golden.py, with the model the golden is of.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import ref_logits  # noqa: E402
from compare_logits import block_errors_decode, block_errors_prefill  # noqa: E402
from flashdesk_ref.safetensors import SafeTensorsFile, decode_float  # noqa: E402

GOLDENS = os.path.join(REPO, "tests", "data", "goldens", "official")


def load_floats(path):
    f = SafeTensorsFile(path)
    return {n: decode_float(f.dtype(n), f.get(n)) for n in f.names()
            if f.dtype(n) in ("F32", "BF16", "F16")}


def oracle_run(model, golden, out, fp32_sums):
    args = ["--model", model, "--block-inputs", golden, "--prefill", "exact", "--dump", "--out", out]
    if fp32_sums:
        args.append("--fp32-sums")
    with contextlib.redirect_stdout(io.StringIO()):
        ref_logits.main(args)
    return load_floats(out)


def order_noise(model, golden):
    """{"prefill": [L], "decode": [L]}: the two oracles' block errors (0 where a block's update is
    zero, so the ratio is undefined)."""
    with tempfile.TemporaryDirectory() as tmp:
        exact = oracle_run(model, golden, os.path.join(tmp, "exact.safetensors"), False)
        torch_order = oracle_run(model, golden, os.path.join(tmp, "fp32.safetensors"), True)
    steps = exact["decode_block_out"].shape[0]

    def clean(errs):
        return [float(e) if np.isfinite(e) else 0.0 for e in errs]

    return {"prefill": clean(block_errors_prefill(exact, torch_order)),
            "decode": clean(block_errors_decode(exact, torch_order, steps))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="flash-tiny")
    p.add_argument("--model", default=os.path.join(REPO, "assets", "models", "flash-tiny"))
    p.add_argument("--goldens", default=GOLDENS)
    a = p.parse_args(argv)
    manifest_path = os.path.join(a.goldens, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    case = manifest["cases"][a.case]
    noise = order_noise(a.model, os.path.join(a.goldens, case["file"]))
    noise["made_by"] = "tools/official_order_noise.py"
    case["order_noise"] = noise
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, manifest_path)
    for part in ("prefill", "decode"):
        print(f"{a.case} {part} order noise: " + " ".join(f"{e:.1e}" for e in noise[part]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
