#!/usr/bin/env python3
"""Training throughput table: tokens/s and peak memory of full training steps (real demo or toy
data, AdamW step included) for a few settings variants, each against the first as baseline.

  python3 tools/train/bench.py --settings tools/train/configs/flash-tiny.json --steps 6 \
      --variant base: --variant mt128k:micro_tokens=131072 --variant 'ops:compile="ops"'
  A variant is NAME:KEY=JSON;KEY=JSON (settings overrides).
  --phase-step S: run the steps as global step S (0 = dense warm-up without QAT; >= the QAT
  and dense limits = the main phase).
  --profile N: after the timed steps, one more step under torch.profiler; prints the N operators
  with the most device time (self), the step's host and device totals, a table of the step's
  named regions (forward, attention, mhc, moe, ...; tools/train/regions.py), and writes a Chrome
  trace to --trace when given.
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
from train.regions import PREFIX  # noqa: E402
from train.settings import load_settings  # noqa: E402
from train.train import resolve, set_matmul_precision  # noqa: E402


def parse_variant(text):
    name, _, rest = text.partition(":")
    over = {}
    for item in filter(None, rest.split(";")):
        k, _, v = item.partition("=")
        over[k] = json.loads(v)
    return name, over


def profile_step(tr, stream, phase_step, device, rows, trace=None):
    """One training step under torch.profiler: the top `rows` operators by self device time."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _, samples = stream.get()
    t0 = time.time()
    with profile(activities=acts) as prof:
        tr.train_step(phase_step, samples)
        if device.type == "cuda":
            torch.cuda.synchronize()
    wall = time.time() - t0
    events = prof.key_averages()
    key = "self_device_time_total" if hasattr(events[0], "self_device_time_total") else "self_cuda_time_total"
    sort = key if device.type == "cuda" else "self_cpu_time_total"
    # Kernels appear twice, as their own events and in their operator's self device time: count
    # the kernel events only (the table's "Self CUDA time total").
    kernels = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
    device_total = sum(getattr(e, key, 0) for e in (kernels or events)) / 1e6
    host_total = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"profiled step: wall {wall:.2f} s (with profiler), device self time {device_total:.2f} s, "
          f"host self time {host_total:.2f} s, {sum(e.count for e in events)} operator calls")
    print(events.table(sort_by=sort, row_limit=rows, max_name_column_width=60))
    print(format_regions(region_rows(events), device_total, host_total))
    if trace:
        prof.export_chrome_trace(trace)


def region_rows(events):
    """[(name, calls, host s, device s)] of the step's named ranges (tools/train/regions.py),
    inclusive of nested ranges, by name."""
    out = []
    for e in events:
        if e.key.startswith(PREFIX):
            dev = getattr(e, "device_time_total", None)
            if dev is None:
                dev = getattr(e, "cuda_time_total", 0)
            out.append((e.key[len(PREFIX):], e.count, e.cpu_time_total / 1e6, dev / 1e6))
    return sorted(out)


def format_regions(rows, device_total, host_total):
    lines = ["region                 calls   host s  of host  device s  of device",
             *(f"{n:<22} {c:>5} {h:>8.3f} {h / max(host_total, 1e-9):>7.0%} {d:>9.3f} "
               f"{d / max(device_total, 1e-9):>9.0%}" for n, c, h, d in rows),
             "(inclusive times; a nested range, e.g. attention.indexer, is also inside its parent. The "
             "backward's kernels run on autograd's thread and are not attributed to \"backward\": "
             "its device time is the step's minus forward and optimizer.)"]
    return "\n".join(lines)


def run_variant(base, over, steps, phase_step, device, emulate, profile_rows=0, trace=None):
    s = dict(base, **over)
    if s["task_source"] == "demo":
        s["task_options"] = dict(s["task_options"], tokenizer=resolve(s["tokenizer"]))
    if s.get("compile") == "ops":
        from train import compile_ops
        compile_ops.enable()
    if device.type == "cuda":  # per variant, as train.py does
        set_matmul_precision(s)
    cfg = load_model_config(resolve(s["model_config"]))
    torch.manual_seed(0)
    model = Transformer(cfg).to(device)
    tok = resolve(s["tokenizer"]) if s["task_source"] == "demo" else None
    hasher = load_hasher(cfg, None, tok)
    if hasher is not None:
        hasher.to(device)
    num = Numerics(emulate_fp32=emulate, block=cfg.weight_block, blocked=s["blocked_linears"])
    tr = Trainer(model, num, hasher, s, device, None)
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
        if profile_rows:
            profile_step(tr, stream, phase_step, device, profile_rows, trace)
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
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="profile one more step, print N rows")
    ap.add_argument("--trace", help="with --profile: write a Chrome trace here")
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
                                         device.type == "cpu", a.profile, a.trace)
        except RuntimeError as e:          # e.g. out of memory: report and continue
            print(f"{name:<14} failed: {str(e).splitlines()[0][:80]}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        first = first or rate
        print(f"{name:<14} {rate:>10.0f} {dt:>8.3f} {peak:>9.2f} {rate / first:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
