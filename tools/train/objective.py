"""One forward of a batch and its losses: next-token cross-entropy on the target positions
(chunked, the logits recomputed in backward), the indexer distillation KL per index source, and
the MoE sequence balance loss."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from . import indexer as ix
from .context import ForwardContext, window_bounds
from .regions import region

F32 = torch.float32


@dataclass
class Phase:
    """Training switches that change over the run."""
    dense: bool = False          # dense warm-up of the compressed attention
    distill: bool = True         # indexer distillation on
    cpu_topk: bool = False       # torch.topk on the CPU over each row's real entries (checks)


def make_context(model, batch, phase, hasher=None, record=None):
    cfg = model.cfg
    B, N = batch.ids.shape
    lo_e, lo_d = window_bounds(N, cfg.sliding_window, batch.bounded_start, batch.ids.device)
    ctx = ForwardContext(ids=batch.ids, valid=batch.valid, valid_rows=batch.valid_rows,
                         is_image=batch.is_image,
                         window=cfg.sliding_window, lo_encoder=lo_e, lo_decoder=lo_d,
                         rope=model.rope, dense=phase.dense, cpu_topk=phase.cpu_topk,
                         distill=phase.distill, record=record)
    if cfg.engram_layer_ids:
        ctx.engram_ids = hasher.hash_ids(batch.ids, batch.is_image)
    return ctx


def _ce_chunk(h, head, targets, model, num):
    return F.cross_entropy(model.logits(num, h), targets, reduction="sum")


def cross_entropy_sum(model, num, h, targets, chunk=8192):
    """Sum of CE over rows h [M, dim]; chunks are checkpointed so [M, V] logits never persist."""
    total = h.new_zeros((), dtype=F32)
    for s in range(0, h.shape[0], chunk):
        args = (h[s:s + chunk], None, targets[s:s + chunk], model, num)
        if torch.is_grad_enabled():
            total = total + checkpoint(_ce_chunk, *args, use_reentrant=False)
        else:
            total = total + _ce_chunk(*args)
    return total


def batch_losses(model, num, batch, phase, hasher=None):
    """dict: ce_sum (FP32 scalar), n_tokens, kl (mean over index sources or None),
    balance (mean over MoE layers)."""
    ctx = make_context(model, batch, phase, hasher)
    h = model(num, batch, ctx)
    rows = batch.loss_rows
    with region("loss.ce"):
        ce_sum = cross_entropy_sum(model, num, h.flatten(0, 1).index_select(0, rows),
                                   batch.targets.reshape(-1).index_select(0, rows))
    kls = []
    with region("loss.indexer_kl"):
        for st in ctx.index_state.values():
            out = ix.distill_loss(st, batch.valid)
            if out is not None:
                kls.append(out[0])
    bal = [b for _, b in ctx.moe_stats]
    return dict(ce_sum=ce_sum, n_tokens=rows.numel(),
                kl=torch.stack(kls).mean() if kls else None,
                balance=torch.stack(bal).mean() if bal else None)
