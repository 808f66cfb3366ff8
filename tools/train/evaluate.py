"""Held-out evaluation: per task, greedy exact match of the final answer and token accuracy,
with the prompt prefilled exactly or with decoder bounded replay.

Teacher-forced argmax over the answer equals greedy decoding's exact match: greedy output
matches the reference iff, with the reference prefix, every answer position's argmax is the
reference token (EOS included), by induction over the positions.
"""
import torch

from .batch import collate, plan_microbatches
from .data import eval_samples
from .objective import Phase, make_context


def make_eval_sets(source, settings):
    """{name: [Sample]} from settings["eval_tasks"] ({name: generator options, "task" naming the
    generator}) or, when None, one set per training task with default options."""
    spec = settings["eval_tasks"] or {t: {} for t in settings["tasks"]}
    return {name: eval_samples(source, name, i, settings["seed"], settings["eval_samples"],
                               settings["max_len"], dict(opts))
            for i, (name, opts) in enumerate(spec.items())}


@torch.no_grad()
def answer_correct(model, num, batch, hasher):
    """Per row: exact match of the whole final response (thinking included) and of the answer
    after </think> (teacher-forced through the reference thinking); (correct, total) tokens."""
    ctx = make_context(model, batch, Phase(dense=False, distill=False), hasher)
    h = model(num, batch, ctx)
    B, N = batch.ids.shape
    pos = torch.arange(N, device=batch.ids.device).unsqueeze(0)
    ans = batch.loss_mask & (pos >= (batch.answer_start - 1).unsqueeze(1))
    post = ans & (pos >= (batch.answer_from - 1).unsqueeze(1))
    pred = torch.full_like(batch.ids, -1)
    pred[ans] = model.logits(num, h[ans]).argmax(-1)
    hit = (pred == batch.targets) | ~ans
    return hit.all(1), (hit | ~post).all(1), int((hit & ans).sum()), int(ans.sum())


def evaluate(model, num, hasher, eval_sets, settings, device, modes=("exact", "bounded")):
    """eval_sets: {name: [Sample]} -> rows (task, mode, exact_match, answer_match, token_acc, n)."""
    was_training = model.training
    model.eval()
    rows = []
    W = model.cfg.sliding_window
    pad = max(settings["pad_multiple"], W)
    for task, samples in eval_sets.items():
        for mode in modes:
            em, am, correct, total = 0, 0, 0, 0
            groups = plan_microbatches([len(s) for s in samples], settings["eval_max_tokens"], pad)
            for g in groups:
                part = [samples[i] for i in g]
                b = collate(part, pad, W, [mode == "bounded"] * len(part),
                            keep_prefix_loss=False).to(device)
                ok, ok_answer, c, t = answer_correct(model, num, b, hasher)
                em += int(ok.sum())
                am += int(ok_answer.sum())
                correct += c
                total += t
            n = max(1, len(samples))
            rows.append(dict(task=task, mode=mode, exact_match=em / n, answer_match=am / n,
                             token_acc=correct / max(1, total), n=len(samples)))
    model.train(was_training)
    return rows
