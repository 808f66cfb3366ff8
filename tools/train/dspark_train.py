#!/usr/bin/env python3
"""Trains a DSpark draft head (dspark_head.py) against a frozen target (flash-tiny) and exports
it in the published layout (dspark_export.py).

    python3 tools/train/dspark_train.py --out OUT [--minutes 6] [--steps N] [--device cuda]

Data: the demo tasks (tools/demo generators through train/demo_tasks.py; text tasks only) and,
first, the target's own greedy continuations of demo prompts (generated here with the trainer's
forward; --gen-prompts, --gen-tokens). Labels are the target's greedy next token at each
position of a sequence (teacher-forced argmax). Row i of the draft at anchor P learns the token
at P+1+i only where the sequence follows the target's greedy path from P+1 to P+i, so every
label is the target's own greedy continuation after the anchor: what a draft must match to be
accepted. On its own generations that holds everywhere; on demo text where the data agrees.

--cache-batches K keeps the first K target passes (features and greedy picks of a batch) and,
once K exist, trains on them with fresh random anchors: a step then costs only the head, the
target's forward being most of a step otherwise.

Loss: mean CE of the Markov-corrected logits (Markov input teacher-forced with the labels, which
are the draft's own tokens on every accepted path) + conf_weight * BCE of the confidence logit
against "row i's argmax equals its label", over rows whose earlier rows all matched (so
sigmoid(confidence) is the conditional acceptance probability and its cumulative product the
survival, MODEL-REFERENCE §10.2) + balance_weight * the MoE balance loss; the gate biases move
aux-loss-free as in the main trainer.

Writes OUT/head/{config.json, model.safetensors.index.json, model-dspark.safetensors} and
OUT/dspark_log.csv; the log lines go to stdout.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.data import make_task_source, sample_seed  # noqa: E402
from train.dspark_export import write_head  # noqa: E402
from train.dspark_head import DsparkConfig, DsparkHead  # noqa: E402
from train.dspark_target import Target  # noqa: E402
from train.numerics import Numerics  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = ("conversation", "prose", "arithmetic", "copy", "followup", "recall")
TRAIN_STREAM, GEN_STREAM, DEV_STREAM = 11, 12, 13   # seed streams (eval prompts use others)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=os.path.join(REPO, "assets/models/flash-tiny"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--minutes", type=float, default=6.0, help="wall-clock budget, all included")
    ap.add_argument("--deadline", type=float, help="absolute end time (seconds since the epoch)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seqs", type=int, default=32, help="sequences per step")
    ap.add_argument("--anchors", type=int, default=48, help="drafts per sequence per step")
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--total-steps", type=int, default=100000,
                    help="cosine length in steps; the schedule ends with the time budget too")
    ap.add_argument("--conf-weight", type=float, default=0.5)
    ap.add_argument("--balance-weight", type=float, default=1e-3)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--gen-prompts", type=int, default=256, help="prompts to continue greedily")
    ap.add_argument("--gen-tokens", type=int, default=96)
    ap.add_argument("--gen-chunk", type=int, default=128, help="prompts per generation batch")
    ap.add_argument("--gen-time", type=float, default=0.25, help="most share of the budget")
    ap.add_argument("--init-head", help="start from a head export (dequantised values)")
    ap.add_argument("--cache-batches", type=int, default=0,
                    help="keep this many target passes (features, greedy picks) and, once "
                    "that many exist, train on them with fresh anchors instead of new passes")
    ap.add_argument("--gen-share", type=float, default=0.5, help="share of generated sequences")
    ap.add_argument("--markov-rank", type=int, default=64)
    ap.add_argument("--target-layers", default="9,10,11")
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--init-from-layers", default="9,10,11",
                    help="stage m starts from these target layers' block weights ('' = random)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--dev-every", type=int, default=50)
    ap.add_argument("--emulate-fp32", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="BF16 activations on the CPU too (checks the GPU's code path)")
    return ap.parse_args(argv)


def init_from_target(head, target, layers):
    """Copies each stage's block tensors (attention, norms, mHC, MoE) from a target layer of the
    same shapes: a warm start for a few minutes of training."""
    tl = {blk.role.layer: blk for blk in target.model.layers}
    for stage, l in zip(head.stages, layers):
        src = tl[l].state_dict()
        own = stage.state_dict()
        copy = {k: v for k, v in src.items() if k in own and own[k].shape == v.shape}
        stage.load_state_dict(copy, strict=False)


def demo_samples(source, stream, n, seed, max_len, rng):
    out, j = [], 0
    while len(out) < n:
        task = TASKS[int(rng.integers(len(TASKS)))]
        try:
            out.append(source.sample(task, sample_seed(seed, stream, TASKS.index(task), j),
                                     max_len=max_len))
        except ValueError:
            pass
        j += 1
    return out


def anchors_of(samples, greedy_len, B, A, rng):
    """[S, A] anchors P with sample.target[P] (P is a generated token) and P + B <= len; a row
    with fewer candidates repeats some (weights keep them counted once each pick)."""
    out = np.zeros((len(samples), A), np.int64)
    keep = np.zeros((len(samples), A), bool)
    for r, s in enumerate(samples):
        L = len(s.ids)
        cand = [p for p in range(1, L - B + 1) if s.target[p]]
        if not cand:
            continue
        pick = rng.choice(cand, size=A, replace=len(cand) < A)
        out[r], keep[r] = pick, True
    return out, keep


def batch_labels(ids, greedy, anchors, B):
    """labels [S, A, B] = greedy[P+i]; markov [S, A, B] = ids[P], then greedy[P+i-1];
    on_path [S, A, B]: ids[P+1..P+i] follow the target's greedy picks (label i is the greedy
    continuation)."""
    off = torch.arange(B, device=ids.device)
    pos = anchors.unsqueeze(-1) + off                                         # [S, A, B]
    S, A = anchors.shape
    g = torch.gather(greedy, 1, pos.view(S, -1)).view(S, A, B)
    nxt = torch.gather(ids, 1, (pos + 1).clamp_max(ids.shape[1] - 1).view(S, -1)).view(S, A, B)
    first = torch.gather(ids, 1, anchors).unsqueeze(-1)
    markov = torch.cat((first, g[..., :-1]), -1)
    agree = (nxt == g).long()                                                  # ids[P+i+1] == g[P+i]
    on_path = torch.cat((torch.ones_like(agree[..., :1]), torch.cumprod(agree[..., :-1], -1)), -1)
    return g, markov, on_path.bool()


def draft_loss(head, target, num, entry, A, rng, conf_weight, balance_weight):
    """entry: (samples, ids, features, greedy) of one target pass (Target.run)."""
    B = head.dcfg.block_size
    samples, ids, feats, greedy = entry
    anc, keep = anchors_of(samples, ids.shape[1], B, A, rng)
    anc = torch.from_numpy(anc).to(ids.device)
    keep = torch.from_numpy(keep).to(ids.device)
    labels, markov, on_path = batch_labels(ids, greedy, anc, B)
    x, base, balance = head.rows(num, target.embed, target.head, feats.to(num.act), ids, anc)
    logits, conf = head.correct(num, x, base, markov)
    m = on_path & keep.unsqueeze(-1)
    ce = F.cross_entropy(logits[m].float(), labels[m])
    with torch.no_grad():
        hit = logits.argmax(-1) == labels
        before = torch.cat((torch.ones_like(hit[..., :1]), torch.cumprod(hit[..., :-1].long(), -1).bool()), -1)
        cm = m & before
        accepted = (torch.cumprod(hit.long(), -1) * m.all(-1, keepdim=True)).sum(-1).float()
    bce = F.binary_cross_entropy_with_logits(conf[cm].float(), hit[cm].float()) if cm.any() else ce * 0
    bal = torch.stack(balance).mean() if balance else ce * 0
    loss = ce + conf_weight * bce + balance_weight * bal
    full = m.all(-1)
    stats = dict(ce=float(ce), bce=float(bce), acc1=float(hit[..., 0][m[..., 0]].float().mean()),
                 accepted=float(accepted[full].mean()) if full.any() else float("nan"))
    return loss, stats


def lr_at(step, a, time_done=0.0):
    """Linear warm-up, then a cosine to 10% over whichever ends first: total_steps or the
    training time (time_done = the share of it used)."""
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    t = min(1.0, max((step - a.warmup) / max(1, a.total_steps - a.warmup), time_done))
    return a.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def main(argv=None):
    t0 = time.time()
    a = parse_args(argv)
    end = a.deadline if a.deadline else t0 + a.minutes * 60
    device = torch.device(a.device)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    num = Numerics(emulate_fp32=a.emulate_fp32 or (device.type == "cpu" and not a.bf16))
    layers = [int(v) for v in a.target_layers.split(",")]
    target = Target(a.target, num, device, layers)
    cfg = target.cfg
    dcfg = DsparkConfig(5, 3, layers, a.markov_rank, None, a.top_k,
                        cfg.raw["text_config"]["dspark_noise_token_id"])
    head = DsparkHead(cfg, dcfg)
    if a.init_head:
        import tempfile
        from train.dspark_export import install, load_head
        with tempfile.TemporaryDirectory() as tmp:
            install(a.init_head, a.target, os.path.join(tmp, "m"), link=True)
            load_head(head, os.path.join(tmp, "m"))
    elif a.init_from_layers:
        init_from_target(head, target, [int(v) for v in a.init_from_layers.split(",")])
    head.to(device).train()
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    n_params = sum(p.numel() for p in params)
    log = lambda m: print(m, flush=True)  # noqa: E731
    log(f"dspark head: {n_params / 1e6:.2f}M parameters, {dcfg.keys(cfg)}; device {device}; "
        f"torch {torch.__version__}")
    source = make_task_source("demo", cfg, {})
    eos = int(cfg.raw.get("eos_token_id", 1))
    gen = []
    if a.gen_prompts > 0:
        prompts = sorted((s.ids[:s.answer_start] for s in demo_samples(
            source, GEN_STREAM, a.gen_prompts, a.seed, a.max_len - a.gen_tokens, rng)), key=len)
        tg = time.time()
        gen_end = t0 + (end - t0) * a.gen_time
        for i in range(0, len(prompts), a.gen_chunk):
            if time.time() > gen_end:
                break
            gen += target.generate(prompts[i:i + a.gen_chunk], a.gen_tokens, eos, gen_end)
        n_tok = sum(int(s.target.sum()) for s in gen)
        log(f"generated {len(gen)} continuations, {n_tok} tokens, in {time.time() - tg:.0f} s")
    dev_samples = demo_samples(source, DEV_STREAM, min(16, a.seqs), a.seed, a.max_len, rng)
    dev_entry = (dev_samples,) + target.run(dev_samples)
    cache = []
    os.makedirs(a.out, exist_ok=True)
    csv = open(os.path.join(a.out, "dspark_log.csv"), "w")
    csv.write("step,seconds,lr,loss,ce,bce,acc1,accepted,dev_accepted\n")
    step, last_step_s = 0, 0.0
    export_s = 20.0
    train_t0 = time.time()
    done = lambda: min(1.0, (time.time() - train_t0) / max(1.0, end - export_s - train_t0))  # noqa: E731
    while True:
        if a.steps is not None and step >= a.steps:
            break
        if time.time() + last_step_s + export_s > end:
            break
        ts = time.time()
        if a.cache_batches and len(cache) >= a.cache_batches:
            entry = cache[int(rng.integers(len(cache)))]
        else:
            n_gen = int(round(a.seqs * a.gen_share)) if gen else 0
            samples = [gen[int(i)] for i in rng.integers(len(gen), size=n_gen)] if n_gen else []
            samples += demo_samples(source, TRAIN_STREAM * 1000 + step, a.seqs - n_gen, a.seed,
                                    a.max_len, rng)
            entry = (samples,) + target.run(samples)
            if a.cache_batches:
                cache.append(entry)
        for g in opt.param_groups:
            g["lr"] = lr = lr_at(step, a, done())
        loss, st = draft_loss(head, target, num, entry, a.anchors, rng, a.conf_weight,
                              a.balance_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        for stage in head.stages:
            stage.ffn.update_bias(a.bias_rate)
        step += 1
        last_step_s = time.time() - ts
        dev = ""
        if step % a.dev_every == 0 or step == a.steps:
            head.eval()
            with torch.no_grad():
                _, dst = draft_loss(head, target, num, dev_entry, a.anchors,
                                    np.random.default_rng(1), a.conf_weight, a.balance_weight)
            head.train()
            dev = f"{dst['accepted']:.3f}"
        csv.write(f"{step},{time.time() - t0:.1f},{lr:.3g},{float(loss):.4f},"
                  f"{st['ce']:.4f},{st['bce']:.4f},{st['acc1']:.4f},{st['accepted']:.4f},{dev}\n")
        csv.flush()
        if step % a.log_every == 0 or step == 1 or dev:
            log(f"step {step} {time.time() - t0:.0f}s lr {lr:.2e} loss {float(loss):.3f} "
                f"ce {st['ce']:.3f} bce {st['bce']:.3f} acc1 {st['acc1']:.3f} "
                f"accepted/draft {st['accepted']:.2f}" + (f" dev {dev}" if dev else "")
                + f" ({last_step_s:.2f} s/step)")
    csv.close()
    head.cpu()
    write_head(head, a.target, os.path.join(a.out, "head"))
    log(f"exported {step} steps to {os.path.join(a.out, 'head')} after {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
