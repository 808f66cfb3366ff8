"""The training mixture: which task each sample index gets, by seed, and the task generators' table."""

from demo import arithmetic, chat_format, conversation, copy_task, followup, prose, recall, shapes
from demo.rng import Rng, derive_seed

TASK_WEIGHTS = {"recall": 0.34, "arithmetic": 0.30, "image": 0.14, "conversation": 0.14, "prose": 0.08}
SPLITS = ("train", "eval")


def generate_sample(split, base_seed, index, weights=None, count_tokens=None, max_tokens=4096, image_size=None):
    """Sample `index` of a split: the task is drawn from weights, then the task's own generator runs.

    Seeds derive from (split, base_seed, index), so train and eval samples never share a seed and
    any index can be produced alone (workers can split the index range).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    table = sorted((weights or TASK_WEIGHTS).items())
    task = Rng(derive_seed(split, base_seed, index)).weighted(table)
    seed = derive_seed(split, base_seed, index, task)
    if task == "recall":
        return recall.generate(seed, count_tokens=count_tokens, max_tokens=max_tokens)
    if task == "arithmetic":
        return arithmetic.generate(seed)
    if task == "image":
        return shapes.generate(seed, size=image_size or shapes.DEFAULT_SIZE)
    if task == "conversation":
        return conversation.generate(seed)
    if task == "prose":
        return prose.generate(seed)
    if task == "copy":
        return copy_task.generate(seed)
    if task == "followup":
        return followup.generate(seed)
    raise ValueError(f"unknown task {task!r} in the mixture weights")


def render_sample_text(sample):
    return chat_format.render_text(sample.messages, sample.mode, sample.effort)
