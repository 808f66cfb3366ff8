"""TEMPORARY stand-in tasks on raw token ids (no tokenizer) for tests and CPU smoke runs, until
the demo generators of tools/demo (chat, recall, arithmetic, images) are on main. Same interface
as the real task source: `sample(task, seed, max_len=None) -> Sample`, deterministic per seed.

Ids: 0 BOS, 1 EOS, 2 PAD, 3 USER, 4 ASSISTANT, 5 SEP, 6..15 digits, 16.. letters; the config's
image_token_id marks image spans.
"""
import numpy as np

from .batch import Sample, SampleImage

BOS, EOS, PAD, USER, ASSISTANT, SEP, DIGIT0, LETTER0 = 0, 1, 2, 3, 4, 5, 6, 16


class ToyTasks:
    names = ("copy", "recall", "add", "image")

    def __init__(self, cfg, recall_distance=(20, 60)):
        self.cfg = cfg
        self.vocab = cfg.vocab_size
        self.recall_distance = recall_distance
        self.image_id = cfg.image_token_id
        if self.image_id < LETTER0 + 8 and cfg.vision is not None:
            raise ValueError("image_token_id collides with toy letters")

    def sample(self, name, seed, max_len=None, **options):
        rng = np.random.default_rng(seed)
        s = getattr(self, "_" + options.get("task", name))(rng)
        s.task = name
        if max_len is not None and len(s) > max_len:
            return self.sample(name, seed + 7919, max_len, **options)
        return s

    def _letters(self, rng, n):
        hi = min(self.vocab, self.image_id if self.cfg.vision is not None else self.vocab)
        return list(rng.integers(LETTER0, hi, n))

    def _build(self, task, prompt, answer, images=()):
        ids = [BOS] + prompt + [ASSISTANT]
        P = len(ids)
        ids = ids + answer + [EOS]
        target = np.zeros(len(ids), bool)
        target[P:] = True
        mask = np.zeros(len(ids), bool)
        for im in images:
            mask[im.start:im.start + im.llm_h * (im.llm_w + 1) + 2] = True
        return Sample(task, np.asarray(ids, np.int64), target, P, list(images),
                      mask if images else None)

    def _copy(self, rng):
        s = self._letters(rng, int(rng.integers(4, 16)))
        return self._build("copy", [USER] + s + [SEP], s)

    def _recall(self, rng):
        keys = [self._letters(rng, 2) for _ in range(3)]
        vals = [self._letters(rng, 2) for _ in range(3)]
        facts = sum((k + [SEP] + v + [SEP] for k, v in zip(keys, vals)), [])
        filler = self._letters(rng, int(rng.integers(*self.recall_distance)))
        q = int(rng.integers(0, 3))
        return self._build("recall", [USER] + facts + filler + [USER] + keys[q] + [SEP], vals[q])

    def _add(self, rng):
        a, b = int(rng.integers(0, 1000)), int(rng.integers(0, 1000))
        digits = lambda n: [DIGIT0 + int(c) for c in str(n)]
        return self._build("add", [USER] + digits(a) + [SEP] + digits(b) + [SEP], digits(a + b))

    def _image(self, rng):
        vc = self.cfg.vision
        p, r = vc.patch_size, vc.downsample_ratio
        vh = vw = 2 * r
        colour = int(rng.integers(0, 4))
        rgb = np.array([[1, -1, -1], [-1, 1, -1], [-1, -1, 1], [1, 1, -1]], np.float32)[colour]
        px = rgb[:, None, None] * np.ones((3, vh * p, vw * p), np.float32)
        px += rng.normal(0, 0.2, px.shape).astype(np.float32)
        patches = px.reshape(3, vh, p, vw, p).transpose(1, 3, 0, 2, 4).reshape(vh * vw, 3 * p * p)
        lh, lw = -(-vh // r), -(-vw // r)
        span = lh * (lw + 1) + 2
        prompt = [USER]
        img = SampleImage(start=2, pixels=patches, vit_h=vh, vit_w=vw, llm_h=lh, llm_w=lw)
        prompt += [self.image_id] * span + [SEP]
        return self._build("image", prompt, [LETTER0 + colour], [img])
