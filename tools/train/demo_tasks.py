"""The flash-tiny training tasks from tools/demo (generators, V4.1 chat format, the 8K BPE
tokenizer) as trainer Samples: ids, target mask, the final answer's start P, image patches.

Task names are the demo's (recall, arithmetic, image, conversation, prose, copy, followup); extra keyword options
go to the task's generator (e.g. distance=2000, final_only=True for recall; op, digits, effort for
arithmetic), which the evaluation sets use for fixed buckets.
"""
import os

import numpy as np

from .batch import Sample, SampleImage

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class DemoTasks:
    def __init__(self, cfg, tokenizer=None, loss_on="all", generator_options=None):
        """generator_options: {task: {option: value}} for that task's generator in the training
        stream (calls naming no options), e.g. {"recall": {"extra_questions": 1.0}}. Eval sets
        name their options (final_only, distance, ...) and keep the held-out distribution."""
        from demo import (arithmetic, conversation, copy_task, followup, make_dataset, prose, recall, shapes,
                          vision_layout)
        self.cfg, self.loss_on = cfg, loss_on
        self.generator_options = {k: dict(v) for k, v in (generator_options or {}).items()}
        self.md, self.layout = make_dataset, vision_layout
        path = tokenizer or os.path.join(REPO, "assets", "models", "flash-tiny", "tokenizer.json")
        self.tok = make_dataset.load_tokenizer(path)
        self.gens = {"recall": recall.generate, "arithmetic": arithmetic.generate,
                     "image": shapes.generate, "conversation": conversation.generate,
                     "prose": prose.generate, "copy": copy_task.generate,
                     "followup": followup.generate}
        self.vision = ({"patch": cfg.vision.patch_size, "downsample": cfg.vision.downsample_ratio,
                        "min_pixels": cfg.vision.min_pixels, "max_image_tokens": cfg.vision.max_image_tokens}
                       if cfg.vision is not None else make_dataset.VISION)
        self.think_end = self.tok.token_id("</think>")
        self.names = tuple(self.gens)

    def count(self, text):
        return len(self.tok.encode(text))

    def sample(self, name, seed, max_len=None, **options):
        """A Sample of task `name` (or of options["task"], the set being called `name`)."""
        task = name
        base = options.pop("task", task)
        gen = self.gens[base]
        if not options:
            options = dict(self.generator_options.get(base, {}))
        if base == "recall":
            options.setdefault("count_tokens", self.count)
            options.setdefault("max_tokens", max_len or 4096)
        for attempt in range(20):
            ex = self.md.render_example(self._processed(gen(seed + attempt * 7919, **options)), self.tok,
                                        self.loss_on, self.vision)
            if max_len is None or len(ex["ids"]) <= max_len:
                return self._to_sample(task, ex)
        raise ValueError(f"task {task}: no sample within {max_len} tokens")

    def _to_sample(self, task, ex):
        ids = np.asarray(ex["ids"], np.int64)
        target = np.asarray(ex["targets"], bool)
        P = _last_run_start(target)
        think = np.nonzero(ids[P:] == self.think_end)[0]
        answer_from = P + int(think[0]) + 1 if len(think) and target[P + think[0]] else P
        mask = np.zeros(len(ids), bool)
        images = []
        for img, (start, length, n_h, n_w) in zip(ex["images"], ex["image_spans"]):
            mask[start:start + length] = True
            images.append(self._image(img, int(start), int(n_h), int(n_w)))
        return Sample(task, ids, target, P, images, mask if images else None, answer_from)

    def _processed(self, sample):
        """The sample with each picture letterboxed to its processed size as the engine does
        (make_dataset.processed, the offline rows' step too), so a picture of any size trains as
        the engine shows it. Without a vision config there are no limits to size by: unchanged."""
        if self.cfg.vision is None:
            return sample
        return self.md.processed(sample, self.vision)

    def _image(self, img, start, llm_h, llm_w):
        """uint8 [H, W, 3] at its processed size -> normalised patches [vh*vw, 3*p*p]."""
        vc, p = self.cfg.vision, self.vision["patch"]
        H, W, _ = img.shape
        if H % p or W % p or (vc and self.layout.resized_size(H, W, p, vc.downsample_ratio, vc.min_pixels,
                                                                vc.max_image_tokens) != (H, W)):
            raise ValueError(f"image {H}x{W} is not at its processed size (patch {p}): the engine "
                             "would resize it first")  # without a vision config only (_processed)
        x = (img.astype(np.float32) / 255.0 - 0.5) / 0.5
        vh, vw = H // p, W // p
        patches = x.transpose(2, 0, 1).reshape(3, vh, p, vw, p).transpose(1, 3, 0, 2, 4)
        return SampleImage(start, patches.reshape(vh * vw, 3 * p * p).copy(), vh, vw, llm_h, llm_w)


def _last_run_start(target):
    """Start of the last run of targets: the final assistant turn's first generated token."""
    idx = np.nonzero(target)[0]
    if len(idx) == 0:
        return len(target)
    k = len(idx) - 1
    while k > 0 and idx[k - 1] == idx[k] - 1:
        k -= 1
    return int(idx[k])
