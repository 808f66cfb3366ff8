#!/usr/bin/env python3
"""Each task's share of a settings file's training tokens, measured on samples drawn with its
generator options (the weights in "tasks" count samples, and a task's mean sample length
changes with its options: recall chats grew from ~540 to ~960 tokens with max_facts 6).

  /usr/bin/python3 tools/train/token_shares.py tools/train/configs/flash-tiny-pictures.json
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.config import load_model_config  # noqa: E402
from train.demo_tasks import DemoTasks  # noqa: E402
from train.settings import load_settings  # noqa: E402
from train.train import resolve  # noqa: E402


def token_shares(settings, samples=150):
    """{task: (mean tokens per sample, share of the training tokens)} of a demo settings dict."""
    cfg = load_model_config(resolve(settings["model_config"]))
    tasks = DemoTasks(cfg, **dict(settings["task_options"], tokenizer=resolve(settings["tokenizer"])))
    means = {}
    for name in settings["tasks"]:
        lengths = [len(tasks.sample(name, 7 * k + 1, max_len=settings["max_len"]).ids) for k in range(samples)]
        means[name] = sum(lengths) / len(lengths)
    total = sum(w * means[t] for t, w in settings["tasks"].items())
    return {t: (means[t], settings["tasks"][t] * means[t] / total) for t in settings["tasks"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settings")
    ap.add_argument("--samples", type=int, default=150, help="samples drawn per task")
    a = ap.parse_args(argv)
    s = load_settings(a.settings)
    if s["task_source"] != "demo":
        raise SystemExit("token_shares.py: only demo-task settings have token lengths")
    print(f"{'task':<14} {'weight':>7} {'tokens':>7} {'share':>6}")
    for t, (mean, share) in sorted(token_shares(s, a.samples).items(), key=lambda kv: -kv[1][1]):
        print(f"{t:<14} {s['tasks'][t]:>7.3f} {mean:>7.0f} {share:>6.1%}")


if __name__ == "__main__":
    main()
