"""The training loop: phases (dense warm-up, QAT start), micro-batches with gradient
accumulation, AdamW step with clipping and the LR schedule, MoE bias updates, periodic
evaluation, CSV logs, a wall-clock budget, and resume checkpoints."""
import csv
import math
import os
import time

import numpy as np
import torch

from . import resume as rs
from .batch import collate, plan_microbatches
from .data import StepStream, make_task_source
from .evaluate import evaluate, make_eval_sets
from .objective import Phase, batch_losses
from .optim import lr_at, make_optimizer, set_lr
from .regions import region
from .settings import phase_flags

# data_s: of step_s, the time spent waiting for the step's samples (the workers' generation not
# keeping up); rows written before it have none.
TRAIN_FIELDS = ["step", "tokens", "lr", "loss", "ce", "kl", "balance", "grad_norm", "qat",
                "dense", "step_s", "data_s", "tok_per_s", "elapsed_s"]
EVAL_FIELDS = ["step", "task", "mode", "exact_match", "answer_match", "token_acc", "n"]


class Trainer:
    def __init__(self, model, num, hasher, settings, device, out_dir):
        self.model, self.num, self.hasher, self.s = model, num, hasher, settings
        self.device, self.out_dir = device, out_dir
        self.opt = make_optimizer(model, settings, device)
        self.step, self.tokens, self.rewarm_from = 0, 0, None
        self.train_rows, self.eval_rows = [], []
        ck = settings["checkpoint"]
        model.set_checkpointing(ck["attention"], ck["experts"], ck["mixes"])
        impl = settings["moe_impl"]
        model.set_moe_impl(impl if impl != "auto" else ("dense" if device.type == "cuda" else "sorted"))
        model.set_mhc_impl(settings["mhc_impl"])

    # ---- state ------------------------------------------------------------------------------
    def state(self):
        return dict(step=self.step, tokens=self.tokens, seed=self.s["seed"],
                    train_rows=self.train_rows, eval_rows=self.eval_rows)

    def restore(self, compact_dir=None, full_path=None):
        """Resumes from the newer of the full (FP32 + moments) and compact checkpoints."""
        compact = rs.read_state(compact_dir) if compact_dir else None
        full_step = rs.full_step(full_path) if full_path else -1
        if full_step >= 0 and (compact is None or full_step >= compact["step"]):
            st = rs.load_full(full_path, self.model, self.opt)
            source = "full"
        elif compact is not None:
            st, restored = rs.load_compact(compact_dir, self.model, self.opt)
            if not restored:
                self.rewarm_from = st["step"]
            source = "compact" + ("" if restored else " (moments dropped: LR re-warm)")
        else:
            return None
        self.step, self.tokens = st["step"], st["tokens"]
        self.train_rows, self.eval_rows = st["train_rows"], st["eval_rows"]
        self.model.to(self.device)
        return source

    def save(self, compact_dir, full_path=None):
        rs.save_compact(compact_dir, self.model, self.opt, self.state(), self.s["save_moments"])
        self.write_logs(compact_dir)
        if full_path:
            rs.save_full(full_path, self.model, self.opt, self.state())

    def write_logs(self, directory):
        for name, fields, rows in (("train_log.csv", TRAIN_FIELDS, self.train_rows),
                                   ("eval_log.csv", EVAL_FIELDS, self.eval_rows)):
            with open(os.path.join(directory, name), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(rows)

    # ---- one step ---------------------------------------------------------------------------
    def bounded_rows(self, step, n):
        rng = np.random.default_rng(np.random.SeedSequence([self.s["seed"], step, 77]))
        return rng.random(n) < self.s["bounded_fraction"]

    def train_step(self, step, samples):
        s, model = self.s, self.model
        qat, dense, _ = phase_flags(s, step)
        self.num.qat = qat
        phase = Phase(dense=dense, distill=True)
        W = model.cfg.sliding_window
        pad = max(s["pad_multiple"], W)
        bounded = self.bounded_rows(step, len(samples))
        groups = plan_microbatches([len(x) for x in samples], s["micro_tokens"], pad)
        batches = [collate([samples[i] for i in g], pad, W, [bool(bounded[i]) for i in g],
                           s["keep_prefix_loss"]) for g in groups]
        n_loss = max(1, sum(b.n_loss_tokens for b in batches))
        n_tok = sum(len(x) for x in samples)
        sums = torch.zeros(3, device=self.device)       # ce, kl, balance (no host sync per batch)
        for b in batches:
            frac = b.n_valid / n_tok
            b = b.to(self.device)
            with region("forward"):
                out = batch_losses(model, self.num, b, phase, self.hasher)
            loss = out["ce_sum"] / n_loss
            sums[0] += out["ce_sum"].detach() / n_loss
            if out["kl"] is not None:
                loss = loss + s["kl_weight"] * frac * out["kl"]
                sums[1] += out["kl"].detach() * frac
            if out["balance"] is not None:
                loss = loss + s["balance_weight"] * frac * out["balance"]
                sums[2] += out["balance"].detach() * frac
            with region("backward"):
                loss.backward()
        with region("optimizer"):
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), s["grad_clip"])
            lr = lr_at(step, s, self.rewarm_from)
            set_lr(self.opt, lr)
            if math.isfinite(float(gn)):      # the step's one host sync
                self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        for moe in model.moe_layers():
            moe.update_bias(s["bias_update_rate"])
        self.tokens += n_tok
        ce_t, kl_t, bal_t = sums.tolist()
        return dict(step=step, tokens=self.tokens, lr=lr, ce=ce_t, kl=kl_t, balance=bal_t,
                    loss=ce_t + s["kl_weight"] * kl_t, grad_norm=float(gn), qat=int(qat),
                    dense=int(dense))

    # ---- the run ----------------------------------------------------------------------------
    def run(self, budget_s, max_steps=None, save_s_estimate=20.0, log=print, checkpoint_s=None,
            checkpoint=None):
        """Trains until the budget or max_steps. With checkpoint_s, calls checkpoint() every
        checkpoint_s seconds, so a run killed before its end (a device call cut short) still
        leaves its latest state behind."""
        s, cfg = self.s, self.model.cfg
        start_time = time.time()
        source = make_task_source(s["task_source"], cfg, s["task_options"])
        names = list(s["tasks"])
        evalsets = make_eval_sets(source, s) if s["eval_every"] else {}
        stream = StepStream(s["task_source"], cfg, s["task_options"], names,
                            [s["tasks"][t] for t in names], s["seed"], s["step_tokens"],
                            self.step, s["workers"], lambda st: phase_flags(s, st)[2])
        last = last_checkpoint = time.time()
        step_times, eval_s = [], 30.0
        self.model.train()
        try:
            while max_steps is None or self.step < max_steps:
                elapsed = time.time() - start_time
                est = (np.median(step_times[-20:]) if step_times else 0.0) * 1.5
                if elapsed + est + save_s_estimate > budget_s:
                    break
                t_data = time.time()
                step, samples = stream.get()
                data_s = time.time() - t_data
                assert step == self.step
                row = self.train_step(step, samples)
                if self.device.type == "cuda":
                    torch.cuda.synchronize()
                now = time.time()
                dt, last = now - last, now
                step_times.append(dt)
                row.update(step_s=dt, data_s=data_s, tok_per_s=row["tokens"] and sum(len(x) for x in samples) / dt,
                           elapsed_s=now - start_time)
                self.train_rows.append(row)
                self.step += 1
                if self.step % s["log_every"] == 0 or self.step == 1:
                    log(" ".join(f"{k}={_fmt(row[k])}" for k in TRAIN_FIELDS))
                if checkpoint_s and time.time() - last_checkpoint > checkpoint_s:
                    checkpoint()
                    last_checkpoint = last = time.time()
                left = budget_s - (time.time() - start_time) - save_s_estimate
                if s["eval_every"] and self.step % s["eval_every"] == 0 and left > 2 * eval_s:
                    t_eval = time.time()
                    self.run_eval(evalsets, log)
                    eval_s = time.time() - t_eval
                    last = time.time()
        finally:
            stream.close()
        return self.step

    def run_eval(self, evalsets, log=print):
        rows = evaluate(self.model, self.num, self.hasher, evalsets, self.s, self.device)
        for r in rows:
            r["step"] = self.step
            log("eval " + " ".join(f"{k}={_fmt(r[k])}" for k in EVAL_FIELDS))
        self.eval_rows.extend(rows)
        return rows


def _fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)
