"""A task that follows earlier exchanges: 1-3 turns of small talk or copying, then an arithmetic,
copy or conversation sample as the turn to answer.

Why: every arithmetic sample of the first training runs was a chat's first message, and the
shipped model answers "What is 4821 + 1367?" right as a first message (6188) but not after a
greeting ("4821+137", then 6008): in the app, questions usually come later in a chat.
"""

from demo import arithmetic, conversation, copy_task
from demo.rng import Rng
from demo.sample import Sample

FINAL_TASKS = (("arithmetic", 0.6), ("copy", 0.25), ("conversation", 0.15))


def _final(task, seed, mode, effort, arithmetic_options):
    if task == "arithmetic":
        return arithmetic.generate(seed, effort=effort, mode=mode, **arithmetic_options)
    if task == "copy":
        return copy_task.generate(seed, mode=mode, effort=effort)
    return conversation.generate(seed, effort=effort, mode=mode, n_turns=1)


def generate(seed, final=None, arithmetic_options=None, mode=None, effort=None):
    """Earlier turns, then a `final` task sample ("arithmetic", "copy" or "conversation"; drawn
    from the seed unless given) whose mode, effort, answer and scoring the sample keeps.
    arithmetic_options go to arithmetic.generate (e.g. {"level2_columns": True}). mode and effort
    (an eval's): given, they replace the drawn ones, which are still drawn, so that the rest of
    the sample comes from the same draws."""
    rng = Rng(seed)
    task = final or rng.weighted(FINAL_TASKS)
    drawn_mode = "thinking" if rng.chance(0.8) else "chat"
    drawn_effort = rng.randint(1, 100) if drawn_mode == "thinking" else None
    if mode is None:
        mode, effort = drawn_mode, drawn_effort
    elif mode != "thinking":
        effort = None
    last = _final(task, rng.randint(0, 2**31 - 1), mode, effort, arithmetic_options or {})
    earlier = conversation.generate(rng.randint(0, 2**31 - 1), effort=effort, mode=mode,
                                    n_turns=rng.randint(1, 3)).messages
    if rng.chance(0.3):  # a copying exchange among them
        earlier += copy_task.generate(rng.randint(0, 2**31 - 1), mode=mode, effort=effort).messages
    # One system prompt at most, first; the earlier turns' thinking is what their task wrote.
    system = [m for m in earlier + last.messages if m["role"] == "system"][:1]
    turns = [m for m in earlier if m["role"] != "system"] + [
        m for m in last.messages if m["role"] != "system"]
    return Sample(last.task, system + turns, mode, effort, expected=last.expected, match=last.match,
                  distractors=last.distractors, meta=dict(last.meta, followup=True))
