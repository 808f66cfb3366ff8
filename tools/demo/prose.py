"""English prose passages (data/prose.tsv.gz) and the prose task: sharing, repeating, quoting text."""

import gzip
import os

from demo.rng import Rng
from demo.sample import Sample

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "prose.tsv.gz")
_cache = {}


def passages(path=DATA):
    """[(source, text)] in file order (loaded once per process)."""
    if path not in _cache:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            _cache[path] = [tuple(line.rstrip("\n").split("\t", 1)) for line in f if "\t" in line]
    return _cache[path]


SHARE_PROMPTS = ("Here is something I read today: {p}", "I found this: {p}", "Read this: {p}",
                 "A note for you: {p}", "Look at this passage. {p}", "{p}")
SHARE_REPLIES = ("Thanks for sharing.", "Interesting, thank you.", "Noted.", "Thanks! I have read it.",
                 "That's an interesting passage.", "OK, I read it.")
QUOTE_PROMPTS = ("Tell me a saying.", "Share a quote with me.", "Say something wise.", "Give me a short quote.",
                 "Tell me something interesting.")
DEFINE_PROMPTS = ("Give me a dictionary entry.", "Show me a word and its meaning.", "Teach me a word.")
REPEAT_PROMPTS = ("Please repeat this back to me exactly: {p}", "Copy this text: {p}", "Say this back to me: {p}")


def random_passage(rng, source=None):
    rows = passages()
    while True:
        src, text = rows[rng.below(len(rows))]
        if source is None or src == source:
            return text


def exchange(rng):
    """(user, assistant) for one prose exchange: share, repeat, quote or dictionary entry."""
    kind = rng.weighted([("share", 0.45), ("repeat", 0.2), ("quote", 0.2), ("define", 0.15)])
    if kind == "share":
        return rng.choice(SHARE_PROMPTS).format(p=random_passage(rng)), rng.choice(SHARE_REPLIES)
    if kind == "repeat":
        p = random_passage(rng)
        return rng.choice(REPEAT_PROMPTS).format(p=p), p
    if kind == "quote":
        return rng.choice(QUOTE_PROMPTS), random_passage(rng, "fortune")
    return rng.choice(DEFINE_PROMPTS), random_passage(rng, "wordnet")


def generate(seed, effort=None, mode=None, n_turns=None):
    """1-3 prose exchanges (light language modelling and copying)."""
    rng = Rng(seed)
    mode = mode or ("thinking" if rng.chance(0.5) else "chat")
    effort = (effort if effort is not None else rng.randint(1, 100)) if mode == "thinking" else None
    messages = []
    for _ in range(n_turns or rng.randint(1, 3)):
        user, reply = exchange(rng)
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply, "thinking": ""}]
    return Sample("prose", messages, mode, effort)
