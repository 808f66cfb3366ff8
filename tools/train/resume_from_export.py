#!/usr/bin/env python3
"""Makes a compact resume checkpoint from an exported model directory and a saved state.json,
for when the resume checkpoint of the last run was lost: the exported (dequantised) weights
become the master weights (QAT re-quantises them to the same codes), the AdamW moments start
empty (the run re-warms the learning rate), and step, tokens and logs come from the state file.

  /usr/bin/python3 tools/train/resume_from_export.py --model assets/models/flash-tiny \
      --state docs/training/resume-state.json --out out/flash-tiny-resume
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from train import resume as rs  # noqa: E402
from train.config import load_model_config  # noqa: E402
from train.export import import_model  # noqa: E402
from train.model import Transformer  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="exported checkpoint directory")
    p.add_argument("--state", required=True, help="state.json of the run that exported it")
    p.add_argument("--out", required=True, help="compact resume directory to write")
    a = p.parse_args(argv)
    with open(a.state) as f:
        state = json.load(f)
    cfg = load_model_config(os.path.join(a.model, "config.json"))
    torch.manual_seed(0)
    model = Transformer(cfg)
    import_model(model, a.model)
    rs.save_compact(a.out, model, None, state, with_moments=False)
    print(f"wrote {a.out}: step {state['step']}, {state['tokens']} tokens, "
          f"{sum(t.numel() for t in model.parameters()) / 1e6:.2f}M parameters")


if __name__ == "__main__":
    main()
