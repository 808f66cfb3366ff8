"""Training settings: defaults, loading a JSON file of overrides, and the per-step phase."""
import json
import os

DEFAULTS = dict(
    model_config="assets/models/flash-tiny/config.json",
    task_source="demo",           # "demo" (tools/demo) or "toy" (stand-in raw-id tasks)
    task_options={},
    tasks={"chat": 1.0, "recall": 2.0, "arithmetic": 2.0, "image": 1.0},
    tokenizer="assets/models/flash-tiny/tokenizer.json",   # demo tasks, Engram map, export
    engram_map=None,              # engram_map.safetensors; None: model dir's, else built from
                                  # the tokenizer (demo) or the raw-id stand-in (toy)
    seed=1234,
    step_tokens=131072,           # tokens per optimizer step (before padding)
    micro_tokens=65536,           # padded tokens per micro-batch
    pad_multiple=128,             # rows padded to a multiple of this (and of the window)
    lr=2e-3, min_lr_ratio=0.1, warmup_steps=100, total_steps=3000, rewarm_steps=30,
    betas=[0.9, 0.95], adam_eps=1e-8, weight_decay=0.1, grad_clip=1.0, engram_lr_mult=5.0,
    qat_start_step=200,           # QAT off before this step (plain BF16 training)
    dense_steps=300,              # dense compressed attention + dense indexer KL before this
    dense_max_len=2048,           # samples longer than this are redrawn during the dense phase
    max_len=6144,                 # longest sample ever trained
    bounded_fraction=0.25,        # rows trained with decoder bounded replay
    keep_prefix_loss=True,        # bounded rows also train targets before the replay start
    kl_weight=1.0, balance_weight=1e-4, bias_update_rate=1e-3,
    eval_every=250, eval_samples=64, eval_max_tokens=32768,
    eval_tasks=None,              # {name: generator options incl. "task"}; None: the train tasks
    checkpoint=dict(attention=True, experts=True, mixes=True),
    compile="none",               # "none" | "ops" (torch.compile of elementwise helpers)
    moe_impl="auto",              # "sorted" | "dense" | "auto" (dense on CUDA, sorted on CPU)
    mhc_impl="loop",              # "loop" | "matmul": mHC collapse/expand (mhc.py)
    tf32=False,                   # CUDA: TF32 tensor cores for FP32 matrix products (bench first)
    blocked_linears=None,         # FP8/FP4 linears summed per K-block of 32 as the official GEMM
                                  # (FP32 products); None: on in FP32 emulation, off on the GPU
    workers=8,
    save_moments=False,           # 8-bit AdamW moments in the compact checkpoint
    log_every=10,
)


def _read_file(path, seen=()):
    """A settings file's values; "base" names another settings file (relative to this one) whose
    values these override, so a run's settings can say only what it changes."""
    if path in seen:
        raise ValueError(f"settings files include each other: {path}")
    with open(path) as f:
        values = json.load(f)
    base = values.pop("base", None)
    if base is None:
        return values
    merged = _read_file(os.path.normpath(os.path.join(os.path.dirname(path), base)), seen + (path,))
    merged.update(values)
    return merged


def load_settings(path=None, overrides=None):
    s = dict(DEFAULTS)
    if path:
        s.update(_read_file(os.path.normpath(os.path.abspath(path))))
    s.update(overrides or {})
    unknown = set(s) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training settings {sorted(unknown)}")
    return s


def phase_flags(s, step):
    """(qat, dense, max_len) of a step."""
    dense = step < s["dense_steps"]
    return step >= s["qat_start_step"], dense, (s["dense_max_len"] if dense else s["max_len"])
