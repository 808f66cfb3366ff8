"""Renders generated chats into token ids + loss masks (+ images), packed into fixed-length rows.

Library use (on the fly, e.g. in the trainer):
    sys.path.insert(0, "<repo>/tools"); from demo import make_dataset
    tok = make_dataset.load_tokenizer("assets/models/flash-tiny/tokenizer.json")
    for row in make_dataset.stream_rows(tok, split="train", seed=1, max_len=4096, start=0): ...
A row is a dict: ids uint16 [L], targets uint8 [L] (1 = token is a training target: the loss reads
the logits at i-1), segments uint16 [L] (1.. = which example of the row, 0 = padding), images
[uint8 [H, W, 3]], image_spans int32 [M, 4] = (start, length, n_h, n_w) per image, examples
[dict of task/effort/... per example]. Image placeholders are already expanded to the token grid
(every position = image_token_id, targets 0).
CLI: make_dataset.py --out DIR --rows N   (writes .npy files + meta.jsonl)
     make_dataset.py --bench              (samples/s per task on one core)
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import chat_format, image_preprocess, mixture, vision_layout  # noqa: E402
from demo.bpe import Tokenizer  # noqa: E402

DEFAULT_TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "models",
                                 "flash-tiny", "tokenizer.json")
# The shipped flash-tiny vision config's patch_size, downsample_ratio, min_pixels and
# max_image_tokens (assets/models/flash-tiny/config.json; tests/tools/demo_dataset_test.py checks).
VISION = {"patch": 14, "downsample": 3, "min_pixels": 28224, "max_image_tokens": 64}


def load_tokenizer(path=DEFAULT_TOKENIZER):
    return Tokenizer.from_file(path)


def processed(sample, vision=VISION):
    """The sample with each picture letterboxed to the size the engine would show the model
    (image_preprocess.py, a bit-exact port of the engine's preprocessing), so rows for training
    hold what inference sees and spans of the engine's grid; pictures already at that size (every
    168 px default picture of flash-tiny) are kept as they are. Used by the trainer
    (tools/train/demo_tasks.py) and by stream_rows."""
    if sample.images:
        sample.images = [image_preprocess.preprocess(img, vision) for img in sample.images]
    return sample


def render_example(sample, tokenizer, loss_on="all", vision=VISION):
    """One sample -> dict(ids, targets, images, image_spans, info) with image placeholders expanded."""
    segs = chat_format.render_segments(sample.messages, sample.mode, sample.effort)
    ids, targets, positions = chat_format.tokenize_segments(segs, tokenizer, loss_on)
    image_id = tokenizer.token_id(chat_format.IMAGE)
    if len(positions) != len(sample.images):
        raise ValueError(f"{len(positions)} image placeholders but {len(sample.images)} images")
    out_ids, out_targets, spans, prev = [], [], [], 0
    for pos, img in zip(positions, sample.images):
        n_h, n_w = vision_layout.grid(img.shape[0], img.shape[1], vision["patch"], vision["downsample"])
        length = vision_layout.span_length(n_h, n_w)
        out_ids += ids[prev:pos]
        out_targets += targets[prev:pos]
        spans.append((len(out_ids), length, n_h, n_w))
        out_ids += [image_id] * length
        out_targets += [0] * length
        prev = pos + 1
    out_ids += ids[prev:]
    out_targets += targets[prev:]
    info = {"task": sample.task, "mode": sample.mode, "effort": sample.effort, "expected": sample.expected}
    return {"ids": out_ids, "targets": out_targets, "images": list(sample.images), "image_spans": spans, "info": info}


def _new_row():
    return {"ids": [], "targets": [], "segments": [], "images": [], "image_spans": [], "examples": []}


def _finish(row, max_len, pad_id):
    n = len(row["ids"])
    pad = max_len - n
    return {"ids": np.array(row["ids"] + [pad_id] * pad, dtype=np.uint16),
            "targets": np.array(row["targets"] + [0] * pad, dtype=np.uint8),
            "segments": np.array(row["segments"] + [0] * pad, dtype=np.uint16),
            "images": row["images"], "image_spans": np.array(row["image_spans"], dtype=np.int32).reshape(-1, 4),
            "examples": row["examples"]}


def stream_rows(tokenizer, split="train", seed=0, max_len=4096, start=0, pack=True, loss_on="all", weights=None,
                stop=None, image_size=None):
    """Rows of max_len tokens from samples start, start+1, ... (stop: exclusive end index or None).
    Pictures (drawn at image_size, default shapes.DEFAULT_SIZE) are letterboxed as the engine
    would (`processed`).

    pack=True appends whole examples to a row while they fit (BOS starts each example; segments tell
    them apart); pack=False gives one example per row. Examples longer than max_len are skipped.
    """
    pad_id = tokenizer.token_id(chat_format.PAD)

    def count(text):
        return len(tokenizer.encode(text))

    row, index = _new_row(), start
    while stop is None or index < stop:
        sample = mixture.generate_sample(split, seed, index, weights, count_tokens=count, max_tokens=max_len,
                                         image_size=image_size)
        ex = render_example(processed(sample), tokenizer, loss_on)
        ex["info"]["index"] = index
        index += 1
        n = len(ex["ids"])
        if n > max_len:
            continue
        if row["ids"] and (not pack or len(row["ids"]) + n > max_len):
            yield _finish(row, max_len, pad_id)
            row = _new_row()
        offset = len(row["ids"])
        row["ids"] += ex["ids"]
        row["targets"] += ex["targets"]
        row["segments"] += [len(row["examples"]) + 1] * n
        row["images"] += ex["images"]
        row["image_spans"] += [(s + offset, length, h, w) for s, length, h, w in ex["image_spans"]]
        row["examples"].append(dict(ex["info"], offset=offset, length=n))
    if row["ids"]:
        yield _finish(row, max_len, pad_id)


def write_rows(out_dir, rows):
    """tokens.npy uint16 [N, L], targets.npy uint8, segments.npy uint16, images.npy uint8 [M, H, W, 3],
    image_spans.npy int32 [M, 5] = (row, start, length, n_h, n_w), meta.jsonl (one line per example)."""
    os.makedirs(out_dir, exist_ok=True)
    images, spans = [], []
    with open(os.path.join(out_dir, "meta.jsonl"), "w", encoding="utf-8") as meta:
        for r, row in enumerate(rows):
            for ex in row["examples"]:
                meta.write(json.dumps(dict(ex, row=r)) + "\n")
            images += row["images"]
            spans += [(r,) + tuple(int(v) for v in s) for s in row["image_spans"]]
    np.save(os.path.join(out_dir, "tokens.npy"), np.stack([row["ids"] for row in rows]))
    np.save(os.path.join(out_dir, "targets.npy"), np.stack([row["targets"] for row in rows]))
    np.save(os.path.join(out_dir, "segments.npy"), np.stack([row["segments"] for row in rows]))
    np.save(os.path.join(out_dir, "images.npy"), np.stack(images) if images else np.zeros((0, 1, 1, 3), np.uint8))
    np.save(os.path.join(out_dir, "image_spans.npy"), np.array(spans, dtype=np.int32).reshape(-1, 5))


def bench(tokenizer, n=300, seed=0, max_len=4096):
    """Samples/s and tokens/s per task, one core (generation + rendering + tokenization)."""
    def count(text):
        return len(tokenizer.encode(text))

    print(f"{'task':<14}{'samples':>8}{'samples/s':>11}{'tokens/sample':>15}{'tokens/s':>10}")
    for task in sorted(mixture.TASK_WEIGHTS):
        t0, tokens = time.perf_counter(), 0
        for k in range(n):
            s = mixture.generate_sample("train", seed, k, {task: 1.0}, count_tokens=count, max_tokens=max_len)
            tokens += len(render_example(s, tokenizer)["ids"])
        dt = time.perf_counter() - t0
        print(f"{task:<14}{n:>8}{n / dt:>11.1f}{tokens / n:>15.1f}{tokens / dt:>10.0f}")
    t0, rows = time.perf_counter(), 0
    for _ in stream_rows(tokenizer, seed=seed, max_len=max_len, stop=n):
        rows += 1
    dt = time.perf_counter() - t0
    print(f"{'mixture':<14}{n:>8}{n / dt:>11.1f}   rows of {max_len}: {rows / dt:.2f}/s ({rows} rows)")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Render flash-tiny training rows.")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first sample index")
    ap.add_argument("--split", default="train", choices=mixture.SPLITS)
    ap.add_argument("--no-pack", action="store_true")
    ap.add_argument("--loss-on", default="all", choices=("all", "last"))
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    ap.add_argument("--bench", action="store_true", help="print throughput per task instead")
    args = ap.parse_args(argv)
    tok = load_tokenizer(args.tokenizer)
    if args.bench:
        bench(tok, seed=args.seed, max_len=args.max_len)
        return
    if not args.out:
        ap.error("--out is required unless --bench")
    rows = []
    for row in stream_rows(tok, args.split, args.seed, args.max_len, args.start, not args.no_pack, args.loss_on):
        rows.append(row)
        if len(rows) == args.rows:
            break
    write_rows(args.out, rows)
    print(f"wrote {len(rows)} rows of {args.max_len} tokens to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
