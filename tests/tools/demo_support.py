"""Shared setup for the demo-data tests: puts <repo>/tools on sys.path and loads the shipped tokenizer."""

import functools
import hashlib
import os
import pathlib
import re
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


def readers_of(module, *names):
    """The Python files under tools/, module's own (tools/demo/MODULE.py) aside, that import it or
    name one of names: a development module's sentences must have none, or training could read them."""
    # the module's name as a word (an import in any form), not a path to its file in a docstring
    pattern = re.compile("|".join([rf"\b{module}\b(?!\.py)"] + [rf"\b{n}\b" for n in names]))
    tools = pathlib.Path(REPO, "tools")
    return [p for p in tools.rglob("*.py") if p.name != f"{module}.py" and pattern.search(p.read_text())]
