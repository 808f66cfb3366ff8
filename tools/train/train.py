#!/usr/bin/env python3
"""Trains flash-tiny (or any V4.1-style config) for a wall-clock budget, resuming from and
writing resume checkpoints; see tools/train/README.md.

  python3 tools/train/train.py --settings tools/train/configs/flash-tiny.json --minutes 8 \
      --resume out/flash-tiny-resume --full-state out/flash-tiny-state/full.pt \
      --out $OUT/resume [--export $OUT/model]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from train.config import load_model_config  # noqa: E402
from train.engram_map import load_hasher  # noqa: E402
from train.loop import Trainer  # noqa: E402
from train.model import Transformer  # noqa: E402
from train.numerics import Numerics  # noqa: E402
from train.settings import load_settings  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--settings", help="JSON file of training settings (settings.py DEFAULTS)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="override one setting, e.g. --set lr=1e-3")
    p.add_argument("--minutes", type=float, default=8.0, help="wall-clock budget of this run")
    p.add_argument("--max-steps", type=int, help="stop at this global step")
    p.add_argument("--steps", type=int, help="stop after this many steps of this run")
    p.add_argument("--deadline", type=float,
                   help="epoch seconds by which the run must have saved (overrides --minutes)")
    p.add_argument("--no-save", action="store_true", help="write no resume checkpoint (export only)")
    p.add_argument("--resume", help="compact resume directory to start from (if it exists)")
    p.add_argument("--full-state", help="FP32+moments state file kept on this machine")
    p.add_argument("--out", help="directory for the new compact checkpoint + logs")
    p.add_argument("--export", help="also export the model directory here")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--emulate-fp32", action="store_true",
                   help="FP32 activations with BF16 rounding (default on CPU)")
    p.add_argument("--checkpoint-every", type=float, metavar="SECONDS",
                   help="also save the compact checkpoint (to --out) this often during the run")
    p.add_argument("--final-eval", action="store_true", help="evaluate before saving")
    return p.parse_args(argv)


def overrides(pairs):
    out = {}
    for item in pairs:
        key, _, value = item.partition("=")
        out[key] = json.loads(value)
    return out


def resolve(path):
    return path if path is None or os.path.isabs(path) else os.path.join(REPO, path)


def set_matmul_precision(s):
    """CUDA matrix products: TF32 only when the settings ask for it (`tf32`), and BF16 products
    accumulated without reduced-precision reductions, as the engine does."""
    torch.backends.cuda.matmul.allow_tf32 = bool(s["tf32"])
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def main(argv=None):
    t0 = time.time()
    a = parse_args(argv)
    if not a.no_save and not a.out:
        raise SystemExit("train.py: --out is required unless --no-save")
    s = load_settings(a.settings, overrides(a.set))
    if s["task_source"] == "demo":
        s["task_options"] = dict(s["task_options"], tokenizer=resolve(s["tokenizer"]))
    device = torch.device(a.device)
    if device.type == "cuda":
        set_matmul_precision(s)
    if s["compile"] == "ops":
        from train import compile_ops
        compile_ops.enable(log=lambda m: print(m, flush=True))
    cfg = load_model_config(resolve(s["model_config"]))
    torch.manual_seed(s["seed"])
    model = Transformer(cfg).to(device)
    num = Numerics(emulate_fp32=a.emulate_fp32 or device.type == "cpu",
                   block=cfg.weight_block, blocked=s["blocked_linears"])
    engram_map = resolve(s["engram_map"]) or os.path.join(
        os.path.dirname(resolve(s["model_config"])), "engram_map.safetensors")
    tokenizer = resolve(s["tokenizer"]) if s["task_source"] == "demo" else None
    hasher = load_hasher(cfg, engram_map if os.path.exists(engram_map) else None, tokenizer)
    if hasher is not None:
        hasher.to(device)
    trainer = Trainer(model, num, hasher, s, device, a.out)
    src = trainer.restore(a.resume if a.resume and os.path.isdir(a.resume) else None,
                          a.full_state)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model {cfg.name}: {n_params / 1e6:.2f}M parameters; start step {trainer.step} "
          f"({src or 'fresh'}); device {device}; torch {torch.__version__}", flush=True)
    budget = (a.deadline - time.time()) if a.deadline else a.minutes * 60 - (time.time() - t0)
    export_s = 30.0 if a.export else 0.0
    stop = a.max_steps
    if a.steps is not None:
        stop = trainer.step + a.steps if stop is None else min(stop, trainer.step + a.steps)
    if budget > export_s and (stop is None or stop > trainer.step):
        save = None
        if a.checkpoint_every and not a.no_save:
            def save():
                trainer.save(a.out)
                print(f"checkpoint: step {trainer.step} in {a.out}", flush=True)
        trainer.run(budget - export_s, stop, log=lambda m: print(m, flush=True),
                    checkpoint_s=a.checkpoint_every, checkpoint=save)
    if a.final_eval:
        from train.data import make_task_source
        from train.evaluate import make_eval_sets
        source = make_task_source(s["task_source"], cfg, s["task_options"])
        trainer.run_eval(make_eval_sets(source, s), log=lambda m: print(m, flush=True))
    if not a.no_save:
        trainer.save(a.out, a.full_state)
        print(f"saved step {trainer.step} to {a.out} after {time.time() - t0:.0f} s", flush=True)
    if a.export:
        from train.export import export_model
        export_model(model, cfg, a.export, tokenizer_dir=os.path.dirname(resolve(s["tokenizer"])),
                     hasher=hasher)
        print(f"exported to {a.export}", flush=True)


if __name__ == "__main__":
    main()
