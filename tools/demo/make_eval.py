"""Writes the held-out eval set (eval seeds only) as JSONL + PNG images for `flashdesk-cli eval`.

One line per item:
  id, task, mode, effort, messages (the prompt: image parts are {"type": "image", "path": "images/..png"}),
  prompt_text (the rendered prompt incl. the generation prompt: the C++ chat template must match it),
  expected, match ("exact" | "contains"), distractors, reference {thinking, answer}, meta
  (recall: distance_target, distance_tokens, distance_bucket; arithmetic: op, a, b, digits, level;
   image: question_kind).
Scoring (sample.score_answer): exact -> the answer after </think>, stripped, equals expected;
contains -> expected occurs as a whole-word sequence (case-insensitive) and no distractor does.
Cells: recall x EVAL_DISTANCES; arithmetic x {add 4-digit, sub 4-digit, mul 3x2} x efforts
25/50/75/100 (the same problems at every effort); images x question kinds; then "How many red
circles?"-style questions on the same pictures (question kind count_short); last, the same
pictures and questions at other sizes (question kind other_size); then the same pictures and
questions in wordings kept out of training (question kind wording), and 4-digit additions and
subtractions in such wordings at efforts 50 and 75 (ops wording_add, wording_sub), and recall at
500 / 1000 / 2000 tokens asked in such wordings (cell group "recall wording"); last, the same
kind of reworded sums asked after 1-3 turns of small talk (ops wording_add_later,
wording_sub_later).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import arithmetic, chat_format, copy_task, followup, png, recall, shapes  # noqa: E402
from demo.make_dataset import DEFAULT_TOKENIZER, load_tokenizer  # noqa: E402
from demo.rng import derive_seed  # noqa: E402

EVAL_EFFORTS = (25, 50, 75, 100)
ARITH_CELLS = (("add", (4, 4, 4, 4)), ("sub", (4, 4, 4, 4)), ("mul", (3, 3, 2, 2)))


def _item(sample, item_id, image_paths=()):
    messages, paths = [], list(image_paths)
    for m in sample.prompt_messages():
        parts = chat_format.content_parts(m)
        if any(p["type"] == "image" for p in parts):
            m = dict(m, content=[{"type": "image", "path": paths.pop(0)} if p["type"] == "image" else p
                                 for p in parts])
        messages.append(m)
    return {"id": item_id, "task": sample.task, "mode": sample.mode, "effort": sample.effort, "messages": messages,
            "prompt_text": chat_format.render_prompt(sample.prompt_messages(), sample.mode, sample.effort),
            "expected": sample.expected, "match": sample.match, "distractors": sample.distractors,
            "reference": {"thinking": sample.final_thinking(), "answer": sample.final_answer()},
            "meta": {k: v for k, v in sample.meta.items() if k not in ("scene", "mentions")}}


def recall_items(tokenizer, n, seed, max_len, name="recall", buckets=recall.EVAL_DISTANCES, **options):
    """n recall chats at each distance in buckets, ids and seeds named by `name`; options go to
    recall.generate."""
    def count(text):
        return len(tokenizer.encode(text))

    for bucket in buckets:
        for k in range(n):
            s = recall.generate(derive_seed("eval", name, seed, bucket, k), distance=bucket, mode="thinking",
                                effort=75, count_tokens=count, max_tokens=max_len, final_only=True, **options)
            item = _item(s, f"{name}-{bucket}-{k}")
            item["meta"]["distance_bucket"] = bucket
            item["meta"]["distance_tokens"] = recall.measure_distance(s, tokenizer)
            yield item


def recall_wording_items(tokenizer, n, seed, max_len):
    """Recall chats at 500, 1000 and 2000 tokens whose final question is worded from
    wording_grammar's development half (meta cell_group "recall wording", so rows of their own):
    the development counterpart of the sealed set's reworded recall."""
    for item in recall_items(tokenizer, n, seed, max_len, "recall-wording", (500, 1000, 2000), grammar_share=1.0,
                             wording_split="dev"):
        item["meta"]["cell_group"] = "recall wording"
        yield item


def arithmetic_items(n, seed):
    for op, digits in ARITH_CELLS:
        for k in range(n):
            problem_seed = derive_seed("eval", "arithmetic", seed, op, k)
            for effort in EVAL_EFFORTS:
                s = arithmetic.generate(problem_seed, effort=effort, mode="thinking", op=op, digits=digits)
                yield _item(s, f"arith-{op}-{k}-e{effort}")


def _eval_pictures(n, seed, **options):
    """(k, sample) of the eval's pictures: one question at effort 75 each, "describe the picture"
    ones left out (they have no short answer to score); options go to shapes.generate."""
    for k in range(n):
        s = shapes.generate(derive_seed("eval", "image", seed, k), mode="thinking", effort=75, n_questions=1,
                            **options)
        if s.meta["question_kind"] != "describe":
            yield k, s


def image_items(n, seed, out_dir):
    os.makedirs(os.path.join(out_dir, "images"), exist_ok=True)
    for k, s in _eval_pictures(n, seed):
        rel = f"images/image-{k}.png"
        png.write_png(os.path.join(out_dir, rel), s.images[0])
        yield _item(s, f"image-{k}", [rel])


def short_count_items(n, seed):
    """"How many red circles?" (shapes.short_count_sample) on the pictures of image_items."""
    for k, s in _eval_pictures(n, seed):
        q = shapes.short_count_sample(derive_seed("eval", "image-count-short", seed, k), s.meta["scene"],
                                      s.images[0])
        yield _item(q, f"image-count-short-{k}", [f"images/image-{k}.png"])


OTHER_SIZES = (210, 252, 294, 336, 504)  # px; 336 and 504 are scaled down to 294 by the processor


def other_size_items(n, seed, out_dir):
    """The pictures of image_items drawn at other sizes (OTHER_SIZES in turn), with the same
    questions: a picture a user drops is seldom 168 px, the size every training picture had until
    the 1644-step model. 210-294 px are processed as drawn (5x5 to 7x7 image tokens); 336 and 504
    px go through the processor's bicubic downscale to 294, as a larger file does."""
    for k, s in _eval_pictures(n, seed):
        size = OTHER_SIZES[k % len(OTHER_SIZES)]
        rel = f"images/image-{k}-{size}px.png"
        png.write_png(os.path.join(out_dir, rel), shapes.render_scene(s.meta["scene"], size))
        item = _item(s, f"image-size-{k}", [rel])
        item["meta"].update(question_kind="other_size", image_size=size)
        yield item


def wording_items(n, seed):
    """The pictures and questions of image_items asked in wordings of wording_grammar's
    development half, which training never draws (question kind "wording"; the kind asked in
    meta["asked_kind"]): how the model does on picture questions in words it has not seen, for
    decisions that must not look at the sealed test set."""
    for k, s in _eval_pictures(n, seed, grammar_share=1.0, wording_split="dev"):
        item = _item(s, f"image-wording-{k}", [f"images/image-{k}.png"])
        item["meta"].update(question_kind="wording", asked_kind=s.meta["question_kind"])
        yield item


def _reworded_sums(n, seed, later):
    """4-digit additions and subtractions in wordings of wording_grammar's development half at
    efforts 50 and 75, the same problem at both; later: after 1-3 turns of small talk (sometimes a
    copying exchange), as followup.py trains, else as a chat's first message. Their ops name cells
    of their own ("wording_add", or "wording_add_later" when later)."""
    tag = "-later" if later else ""
    for op in ("add", "sub"):
        options = {"op": op, "digits": (4, 4, 4, 4), "grammar_share": 1.0, "wording_split": "dev"}
        for k in range(n):
            sample_seed = derive_seed("eval", "arithmetic-wording" + tag, seed, op, k)
            for effort in (50, 75):
                if later:
                    s = followup.generate(sample_seed, final="arithmetic", mode="thinking", effort=effort,
                                          arithmetic_options=options)
                else:
                    s = arithmetic.generate(sample_seed, effort=effort, mode="thinking", **options)
                item = _item(s, f"arith-wording{tag}-{op}-{k}-e{effort}")
                item["meta"]["op"] = f"wording_{op}" + tag.replace("-", "_")
                yield item


def arithmetic_wording_items(n, seed):
    """The development counterpart of the sealed set's reworded sums (`_reworded_sums`, asked as a
    chat's first message)."""
    return _reworded_sums(n, seed, later=False)


def arithmetic_later_items(n, seed):
    """The same kind of sums asked later in a chat: the issue asks for sums in varied wordings and
    after other turns (`_reworded_sums`, later)."""
    return _reworded_sums(n, seed, later=True)


def copy_items(n, seed):
    """Copying inside the window (copy_task.py): does the model look back at all?"""
    for kind in copy_task.KINDS:
        for k in range(n):
            s = copy_task.generate(derive_seed("eval", "copy", seed, kind, k), kind=kind, mode="thinking",
                                   effort=75)
            yield _item(s, f"copy-{kind}-{k}")


def write_items(out_dir, generators):
    """Every item of the generators as a line of out_dir/eval.jsonl; prints the count by task."""
    counts = {}
    with open(os.path.join(out_dir, "eval.jsonl"), "w", encoding="utf-8") as f:
        for gen in generators:
            for item in gen:
                f.write(json.dumps(item, ensure_ascii=False) + "\n")
                counts[item["task"]] = counts.get(item["task"], 0) + 1
    print(f"wrote {counts} to {out_dir}/eval.jsonl", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the flash-tiny eval set.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=50, help="items per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    args = ap.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    os.makedirs(args.out, exist_ok=True)
    write_items(args.out, (recall_items(tok, args.n, args.seed, args.max_len), arithmetic_items(args.n, args.seed),
                           image_items(args.n * 4, args.seed, args.out), copy_items(args.n, args.seed),
                           short_count_items(args.n * 4, args.seed),
                           other_size_items(args.n * 4, args.seed, args.out),
                           wording_items(args.n * 4, args.seed), arithmetic_wording_items(args.n, args.seed),
                           recall_wording_items(tok, args.n // 2, args.seed, args.max_len),
                           arithmetic_later_items(args.n, args.seed)))


if __name__ == "__main__":
    main()
