"""Shared setup for the demo-data tests: puts <repo>/tools on sys.path and loads the shipped tokenizer."""

import functools
import hashlib
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))
TOKENIZER_JSON = os.path.join(REPO, "assets", "models", "flash-tiny", "tokenizer.json")


@functools.lru_cache(maxsize=1)
def tokenizer():
    from demo.bpe import Tokenizer

    return Tokenizer.from_file(TOKENIZER_JSON)


def sample_digest(sample):
    """A hash of everything a generated sample holds (its text, answers, meta and picture bytes):
    equal digests mean the option under test left the sample as it was."""
    h = hashlib.sha256(repr((sample.task, sample.messages, sample.mode, sample.effort, sample.expected,
                             sample.distractors, sample.meta)).encode())
    for img in sample.images:
        h.update(img.tobytes())
    return h.hexdigest()
