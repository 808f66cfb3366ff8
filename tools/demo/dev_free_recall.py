"""Development cells for recall told and asked in free wordings (issue 21), for `flashdesk-cli
eval --data DIR`:

  cd tools && /usr/bin/python3 -m demo.dev_free_recall --out ../build/eval/demo-free-recall

The development set's `recall wording` cells ask for a fact in wordings of wording_grammar's
development half, while the fact was told as training tells it ("My name is Ana."). These cells
tell the fact asked for in a sentence written here by hand ("People usually call me Ana.", "Home
for me is Lisbon.") and ask for it in another ("Remind me what I'm called."), at 500, 1000 and
2000 tokens back; the chats are recall.generate's development chats (eval seeds, final question
only), the other facts and the filler as drawn. Development data only: no training generator
reads FREE_STATEMENTS or FREE_QUESTIONS (tests/tools/demo_recall_tellings_test.py holds that),
and they were written without looking at the sealed set.

Cells: "recall free 500", "recall free 1000", "recall free 2000" (10 chats each), and the same
chats with only the statement free, asked as recall.generate asked ("recall free_told 500", ...),
to tell the two apart. Written at run time.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import recall  # noqa: E402
from demo.make_eval import DEFAULT_TOKENIZER, _item, load_tokenizer, write_items  # noqa: E402
from demo.recall_tellings import kind_and_word  # noqa: E402
from demo.rng import derive_seed  # noqa: E402

DISTANCES = (500, 1000, 2000)

# By the fact's kind (recall.make_fact's keys: "name", "fav_CAT", a number's or code's name,
# "place:VERB", "pet", "rel_WHO", "time_EVENT"): a statement and a question, {v} the value and {w}
# the kind's word (the category, number, code, animal, relative or event).
FREE_STATEMENTS = {
    "name": "People usually call me {v}.",
    "fav": "Of all the {w}s, {v} is the one I love most.",
    "number": "Note down {v} as my {w}.",
    "code": "Here is the {w} you will need later: {v}.",
    "place:I live in": "Home for me is {v}.",
    "place:I was born in": "My birthplace is {v}.",
    "place:I work in": "My office is in {v}.",
    "place:Next month I am travelling to": "My trip next month goes to {v}.",
    "pet": "{v} is the name of my {w}.",
    "rel": "{v} is my {w}.",
    "time": "The {w} starts at {v}.",
}
FREE_QUESTIONS = {
    "name": "Remind me what I'm called.",
    "fav": "Which {w} do I love most?",
    "number": "Remind me of my {w}.",
    "code": "Which {w} did I give you?",
    "place:I live in": "Which city is home for me?",
    "place:I was born in": "What's my birthplace?",
    "place:I work in": "In which city is my office?",
    "place:Next month I am travelling to": "Where is my trip next month going?",
    "pet": "Tell me again what my {w} is named.",
    "rel": "Remind me who my {w} is.",
    "time": "Remind me when the {w} starts.",
}


def free_sample(sample, ask=True):
    """sample (recall.generate's, final question only) with the asked fact told (and, when ask,
    asked) in the free wordings: its first mention in a user turn and the final question replaced."""
    kind, word = kind_and_word(sample.meta["fact_key"], sample.messages[-1]["content"])
    told = sample.meta["mentions"][0]
    statement = FREE_STATEMENTS[kind].format(v=sample.expected, w=word)
    question = FREE_QUESTIONS[kind].format(w=word)
    messages = [dict(m) for m in sample.messages]
    users = [m for m in messages[:-2] if m["role"] == "user" and told in m["content"]]
    if not users:
        raise ValueError(f"dev_free_recall: the fact's statement {told!r} is in no user turn")
    users[0]["content"] = users[0]["content"].replace(told, statement, 1)
    if ask:
        messages[-2] = dict(messages[-2], content=question)
    sample.messages = messages
    sample.meta = dict(sample.meta, mentions=[statement], free_kind=kind)
    return sample


def free_items(tokenizer, n, seed, max_len=4096):
    def count(text):
        return len(tokenizer.encode(text))

    for group, ask in (("free", True), ("free_told", False)):
        for distance in DISTANCES:
            for k in range(n):
                fact_seed = derive_seed("eval", "recall-free", seed, distance, k)
                s = recall.generate(fact_seed, distance=distance, mode="thinking", effort=75, count_tokens=count,
                                    max_tokens=max_len, final_only=True)
                s = free_sample(s, ask)
                item = _item(s, f"recall-{group.replace('_', '-')}-{distance}-{k}")
                item["meta"].update(cell_group=f"recall {group}", distance_bucket=distance,
                                    distance_tokens=recall.measure_distance(s, tokenizer))
                yield item


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the development cells of recall in free wordings.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=10, help="chats a distance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=DEFAULT_TOKENIZER)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    write_items(args.out, [free_items(load_tokenizer(args.tokenizer), args.n, args.seed)])


if __name__ == "__main__":
    main()
