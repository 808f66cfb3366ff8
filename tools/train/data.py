"""Deterministic training and evaluation data: which samples make up step i (a function of the
seed and i only, so a resumed run continues the same stream), produced by worker processes ahead
of the training loop, and fixed held-out evaluation sets per task.

Task sources: `toy` (tools/train/toy_tasks.py, raw ids) or `demo` (the tools/demo generators and
tokenizer, once on main; see make_task_source).
"""
import multiprocessing as mp
from collections import deque

import numpy as np

EVAL_STREAM = 1_000_000_007   # seed-sequence key separating held-out seeds from training seeds


def make_task_source(kind, cfg, options=None):
    options = options or {}
    if kind == "toy":
        from .toy_tasks import ToyTasks
        return ToyTasks(cfg, **options)
    if kind == "demo":
        from .demo_tasks import DemoTasks
        return DemoTasks(cfg, **options)
    raise ValueError(f"unknown task source {kind!r}")


def sample_seed(seed, stream, task_index, counter):
    return int(np.random.SeedSequence([seed, stream, task_index, counter]).generate_state(1)[0])


def step_samples(source, tasks, weights, seed, step, step_tokens, max_len=None):
    """Samples of training step `step`: tasks drawn by weight until the token budget is met."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, step]))
    p = np.asarray(weights, np.float64)
    p = p / p.sum()
    out, total, j = [], 0, 0
    while total < step_tokens:
        t = int(rng.choice(len(tasks), p=p))
        s = source.sample(tasks[t], sample_seed(seed, step, t, j), max_len=max_len)
        out.append(s)
        total += len(s)
        j += 1
    return out


def eval_samples(source, task, task_index, seed, n, max_len=None, options=None):
    return [source.sample(task, sample_seed(seed, EVAL_STREAM, task_index, j), max_len=max_len,
                          **dict(options or {})) for j in range(n)]


# ---- worker pool -------------------------------------------------------------------------
_WORKER = {}


def _init_worker(kind, cfg_raw, options):
    from .config import ModelConfig
    cfg = ModelConfig(cfg_raw)
    _WORKER["source"] = make_task_source(kind, cfg, options)


def _work(args):
    tasks, weights, seed, step, step_tokens, max_len = args
    return step, step_samples(_WORKER["source"], tasks, weights, seed, step, step_tokens, max_len)


class StepStream:
    """Yields (step, samples) from `start` on, produced by `workers` processes (0: inline)."""

    def __init__(self, kind, cfg, options, tasks, weights, seed, step_tokens, start, workers,
                 max_len_at=lambda step: None, prefetch=4):
        self.args = (tasks, weights, seed, step_tokens)
        self.max_len_at = max_len_at
        self.next_step = start
        self.pending = deque()
        self.pool = None
        if workers > 0:
            ctx = mp.get_context("spawn")
            self.pool = ctx.Pool(workers, initializer=_init_worker, initargs=(kind, cfg.raw, options))
        else:
            _init_worker(kind, cfg.raw, options)
        self.prefetch = max(prefetch, workers)

    def _submit(self):
        tasks, weights, seed, step_tokens = self.args
        a = (tasks, weights, seed, self.next_step, step_tokens, self.max_len_at(self.next_step))
        self.pending.append(self.pool.apply_async(_work, (a,)) if self.pool else a)
        self.next_step += 1

    def get(self):
        while len(self.pending) < (self.prefetch if self.pool else 1):
            self._submit()
        item = self.pending.popleft()
        return item.get() if self.pool else _work(item)

    def close(self):
        if self.pool is not None:
            self.pool.terminate()
            self.pool = None
