#!/usr/bin/env python3
"""Writes the oracle's DSpark draft goldens for the C++ test tests/engine/golden_dspark_test.cpp.

    /usr/bin/python3 tools/dspark_goldens.py --cli build/release/bin/flashdesk-cli \
        [--out tests/data/goldens/dspark/every-role.json]

`flashdesk-cli make-random` writes the checkpoint of assets/configs/test-dspark.json (seed 3, as
the C++ test regenerates it), then the oracle (flashdesk_ref.dspark, the official forward_spec
over the oracle's ops) prefills PROMPT_LEN ids recording the target features, seeds the stages'
rings and, for STEPS steps: drafts after the target's greedy token (ids, Markov-corrected logits,
confidence), then runs that token through the target and seeds its features. The JSON holds the
prompt, the target features (the C++ test seeds with these, so the comparison is of the head
alone: the main forward's own rounding noise, docs/goldens.md, stays out), each step's input
token, the draft outputs and the noise band (the head with FP32 torch-order sums).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashdesk_ref.checkpoint import Checkpoint  # noqa: E402
from flashdesk_ref.dspark import Draft  # noqa: E402
from flashdesk_ref.model import Model  # noqa: E402
from flashdesk_ref.ops import Rounding  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED, PROMPT_LEN, STEPS = 3, 37, 4


def run(model_dir):
    ckpt = Checkpoint(model_dir)
    model = Model(ckpt)
    draft = Draft(ckpt, model)
    features = draft.record(model)
    prompt = [int(v) for v in np.random.default_rng(5).integers(3, 510, size=PROMPT_LEN)]
    state, rings = model.new_state(), draft.new_rings()
    logits = model.step(state, prompt)
    prompt_features = features.take()
    draft.seed(rings, prompt_features, 0)
    steps = []
    for _ in range(STEPS):
        last = int(torch.argmax(logits[-1]))
        tokens, dl, conf = draft.draft(rings, state.pos, last)
        top2 = torch.topk(dl, 2, dim=-1).values
        steps.append({"last": last, "tokens": tokens, "logits": dl.tolist(),
                      "gaps": (top2[:, 0] - top2[:, 1]).tolist(), "confidence": conf.tolist()})
        logits = model.step(state, [last])
        f = features.take()
        draft.seed(rings, f, state.pos - 1)
        steps[-1]["features"] = f[0].tolist()
    return {"config": "assets/configs/test-dspark.json", "seed": SEED, "prompt": prompt,
            "prompt_features": prompt_features.tolist(), "steps": steps}


def noise(model_dir, golden):
    """How far summation order alone moves the head's outputs: the same features and tokens
    through the head with FP32 torch-order sums (the noise band of docs/goldens.md)."""
    ckpt = Checkpoint(model_dir)
    draft = Draft(ckpt, Model(ckpt, rounding=Rounding(exact_sums=False)))
    rings = draft.new_rings()
    draft.seed(rings, torch.tensor(golden["prompt_features"]), 0)
    P, worst_logit, worst_conf = len(golden["prompt"]), 0.0, 0.0
    for s in golden["steps"]:
        _, logits, conf = draft.draft(rings, P, s["last"])
        worst_logit = max(worst_logit, (logits - torch.tensor(s["logits"])).abs().max().item())
        worst_conf = max(worst_conf, (conf - torch.tensor(s["confidence"])).abs().max().item())
        draft.seed(rings, torch.tensor([s["features"]]), P)
        P += 1
    golden["noise_logits"], golden["noise_confidence"] = worst_logit, worst_conf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/goldens/dspark/every-role.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "model")
        subprocess.run([args.cli, "make-random", "--config",
                        os.path.join(ROOT, "assets/configs/test-dspark.json"), "--out", model_dir,
                        "--seed", str(SEED)], check=True, stdout=subprocess.DEVNULL)
        golden = run(model_dir)
        noise(model_dir, golden)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(golden, f)
    print(f"wrote {args.out}: {len(golden['steps'])} drafts, noise band "
          f"{golden['noise_logits']:.4g} (logits), {golden['noise_confidence']:.4g} (confidence)")


if __name__ == "__main__":
    main()
