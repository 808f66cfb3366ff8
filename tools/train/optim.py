"""Optimizer and schedule: AdamW with weight decay on matrices only (norms, biases, hc_*, sinks,
embedding tables and image vectors without), a learning-rate multiplier for Engram tables, linear
warmup then cosine decay to a floor, and a short re-warmup after a resume that dropped moments."""
import math

import torch


def param_groups(model, weight_decay, engram_lr_mult):
    decay, no_decay, engram = [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.endswith("engram.embed.weight"):
            engram.append(p)
        elif p.ndim >= 2 and not name.startswith("embed.") and "hc_" not in name:
            decay.append(p)
        else:
            no_decay.append(p)
    groups = [dict(params=decay, weight_decay=weight_decay, lr_mult=1.0),
              dict(params=no_decay, weight_decay=0.0, lr_mult=1.0)]
    if engram:
        groups.append(dict(params=engram, weight_decay=0.0, lr_mult=engram_lr_mult))
    return groups


def make_optimizer(model, tc, device):
    kwargs = dict(lr=tc["lr"], betas=tuple(tc["betas"]), eps=tc["adam_eps"])
    if device.type == "cuda" and _supports_fused():
        kwargs["fused"] = True
    return torch.optim.AdamW(param_groups(model, tc["weight_decay"], tc["engram_lr_mult"]), **kwargs)


def _supports_fused():
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return (major, minor) >= (2, 0)


def lr_at(step, tc, rewarm_from=None):
    """Warmup to tc.lr over warmup_steps, cosine to lr * min_lr_ratio at total_steps; after a
    resume without optimizer moments (rewarm_from = the resume step) a linear re-warmup over
    rewarm_steps."""
    peak, total = tc["lr"], max(1, tc["total_steps"])
    if step < tc["warmup_steps"]:
        lr = peak * (step + 1) / tc["warmup_steps"]
    else:
        frac = min(1.0, (step - tc["warmup_steps"]) / max(1, total - tc["warmup_steps"]))
        floor = peak * tc["min_lr_ratio"]
        lr = floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * frac))
    if rewarm_from is not None and step - rewarm_from < tc["rewarm_steps"]:
        lr *= (step - rewarm_from + 1) / tc["rewarm_steps"]
    return lr


def set_lr(optimizer, lr):
    for g in optimizer.param_groups:
        g["lr"] = lr * g.get("lr_mult", 1.0)
