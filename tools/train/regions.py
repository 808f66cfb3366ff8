"""Named ranges of a training step for torch.profiler (bench.py --profile prints a table of
them), so a step's time can be split by model part: "region::attention", "region::mhc", ...
Outside a profiler a range costs a few microseconds, and a step opens a few hundred."""
from torch.profiler import record_function

PREFIX = "region::"


def region(name):
    """A context manager marking `name`'s ops (nested ranges are separate rows)."""
    return record_function(PREFIX + name)
