"""Copying: the user gives a short list of random items and asks for it back, or introduces a fact
and asks for it a few turns later, all inside the 128-token window.

Why: flash-tiny after 627 steps copies nothing from its context ("Hi! My name is Quinn." ->
"Nice to meet you, Keiko!"), so recall fails at every distance, even with every compressed entry
selected. Copying a random item is what induction heads do; the items here are random draws, so
the only way to predict them is to look back. A dense dose of such samples is the usual way to
make a small model form those heads early; recall at long distances then needs the sparse path
to fetch what the heads copy.
"""

from demo.lexicon import CITIES, COLOURS, FAVOURITES, FIRST_NAMES, PET_NAMES
from demo.rng import Rng
from demo.sample import Sample

ITEM_POOLS = (FIRST_NAMES, PET_NAMES, CITIES, COLOURS, FAVOURITES["animal"], FAVOURITES["fruit"])

REQUESTS = (
    "Please repeat after me: {items}",
    "Say these back to me, in order: {items}",
    "Repeat exactly: {items}",
    "Can you copy this list? {items}",
    "Echo this: {items}",
)

# (the values, the user's statement, the follow-up question, the answer), each with {value};
# None: any item (a code word may be anything).
INTRODUCTIONS = (
    (FIRST_NAMES, "Hi! My name is {value}.", "What is my name?", "Your name is {value}."),
    (FIRST_NAMES, "Call me {value}, please.", "What should you call me?", "I should call you {value}."),
    (PET_NAMES, "My dog is called {value}.", "What is my dog called?", "Your dog is called {value}."),
    (CITIES, "I live in {value}.", "Where do I live?", "You live in {value}."),
    (None, "My code word is {value}.", "What is my code word?", "Your code word is {value}."),
)
GREETINGS = ("Nice to meet you, {value}!", "Hello, {value}! How can I help?",
             "Got it, {value}.", "Noted: {value}.")


def _item(rng):
    if rng.chance(0.3):
        return str(rng.randint(10, 99999))
    return rng.choice(rng.choice(ITEM_POOLS))


def _repeat(rng):
    items = ", ".join(_item(rng) for _ in range(rng.randint(2, 8)))
    request = rng.choice(REQUESTS).format(items=items)
    return [{"role": "user", "content": request}, {"role": "assistant", "content": items}], items


def _introduce(rng):
    pool, statement, question, answer = rng.choice(INTRODUCTIONS)
    value = rng.choice(pool) if pool else _item(rng)
    messages = [{"role": "user", "content": statement.format(value=value)},
                {"role": "assistant", "content": rng.choice(GREETINGS).format(value=value)}]
    for _ in range(rng.randint(0, 2)):  # a filler exchange or two, still inside the window
        filler = _repeat(rng)[0]
        messages += filler
    messages += [{"role": "user", "content": question},
                 {"role": "assistant", "content": answer.format(value=value)}]
    return messages, value


KINDS = ("repeat", "introduce")


def generate(seed, kind=None, mode=None, effort=None):
    """One copying chat with empty thinking: `kind` "repeat" or "introduce", `mode` "thinking" or
    "chat", `effort` in thinking mode (each drawn from the seed unless given)."""
    rng = Rng(seed)
    kind = kind or ("repeat" if rng.chance(0.5) else "introduce")
    mode = mode or ("thinking" if rng.chance(0.6) else "chat")
    drawn = rng.randint(1, 100)
    effort = (effort or drawn) if mode == "thinking" else None
    if kind not in KINDS:
        raise ValueError(f"copy: unknown kind {kind!r}")
    messages, expected = _repeat(rng) if kind == "repeat" else _introduce(rng)
    for m in messages:
        if m["role"] == "assistant":
            m["thinking"] = ""
    return Sample("copy", messages, mode=mode, effort=effort, expected=expected, match="contains",
                  meta={"kind": kind})
