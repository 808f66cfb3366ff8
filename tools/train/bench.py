#!/usr/bin/env python3
"""Training throughput table: tokens/s and peak memory of full training steps (real demo or toy
data, AdamW step included) for a few settings variants, each against the first as baseline.

  python3 tools/train/bench.py --settings tools/train/configs/flash-tiny.json --steps 6 \
      --variant base: --variant mt128k:micro_tokens=131072 --variant 'ops:compile="ops"'
  A variant is NAME:KEY=JSON;KEY=JSON (settings overrides).
  --phase-step S: run the steps as global step S (0 = dense warm-up without QAT; >= the QAT
  and dense limits = the main phase).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from train.config import load_model_config  # noqa: E402
from train.data import StepStream  # noqa: E402
from train.engram_map import load_hasher  # noqa: E402
from train.loop import Trainer  # noqa: E402
from train.model import Transformer  # noqa: E402
from train.numerics import Numerics  # noqa: E402
from train.settings import load_settings  # noqa: E402
from train.train import resolve  # noqa: E402


def parse_variant(text):
    name, _, rest = text.partition(":")
    over = {}
    for item in filter(None, rest.split(";")):
        k, _, v = item.partition("=")
        over[k] = json.loads(v)
    return name, over


def run_variant(base, over, steps, phase_step, device, emulate):
    s = dict(base, **over)
    if s["task_source"] == "demo":
        s["task_options"] = dict(s["task_options"], tokenizer=resolve(s["tokenizer"]))
    if s.get("compile") == "ops":
        from train import compile_ops
        compile_ops.enable()
    cfg = load_model_config(resolve(s["model_config"]))
    torch.manual_seed(0)
    model = Transformer(cfg).to(device)
    tok = resolve(s["tokenizer"]) if s["task_source"] == "demo" else None
    hasher = load_hasher(cfg, None, tok)
    if hasher is not None:
        hasher.to(device)
    tr = Trainer(model, Numerics(emulate_fp32=emulate, block=cfg.weight_block), hasher, s, device, None)
    names = list(s["tasks"])
    stream = StepStream(s["task_source"], cfg, s["task_options"], names, [s["tasks"][t] for t in names],
                        s["seed"], s["step_tokens"], phase_step, s["workers"])
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, toks = [], []
    try:
        for i in range(steps + 2):
            step, samples = stream.get()
            t0 = time.time()
            tr.train_step(phase_step, samples)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if i >= 2:                      # the first two steps warm up allocator and kernels
                times.append(time.time() - t0)
                toks.append(sum(len(x) for x in samples))
    finally:
        stream.close()
    peak = torch.cuda.max_memory_allocated() / 2 ** 30 if device.type == "cuda" else float("nan")
    rate = statistics.median(t / d for t, d in zip(toks, times))
    return rate, statistics.median(times), peak


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", required=True)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:K=V;K=V")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--phase-step", type=int, default=100000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args(argv)
    base = load_settings(a.settings, {k: json.loads(v) for k, v in (x.split("=", 1) for x in a.set)})
    device = torch.device(a.device)
    variants = [parse_variant(v) for v in (a.variant or ["base:"])]
    print(f"device {device} torch {torch.__version__}; step_tokens {base['step_tokens']}; "
          f"phase step {a.phase_step}; median of {a.steps} steps")
    print(f"{'variant':<14} {'tokens/s':>10} {'s/step':>8} {'peak GiB':>9} {'ratio':>6}")
    first = None
    for name, over in variants:
        try:
            rate, dt, peak = run_variant(base, over, a.steps, a.phase_step, device,
                                         device.type == "cpu")
        except RuntimeError as e:          # e.g. out of memory: report and continue
            print(f"{name:<14} failed: {str(e).splitlines()[0][:80]}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        first = first or rate
        print(f"{name:<14} {rate:>10.0f} {dt:>8.3f} {peak:>9.2f} {rate / first:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
