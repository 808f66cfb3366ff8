"""Development cells for sums asked in free wordings (issue 21), for `flashdesk-cli eval --data DIR`:

  cd tools && /usr/bin/python3 -m demo.dev_free_wordings --out ../build/eval/demo-free

The development set's reworded sums (`wording_add`, `wording_sub`) take their wordings from
wording_grammar's development half: frames, verbs and endings that training also draws, combined
in ways it does not. They sit at 90-95% while the sealed set's sums in its own wordings sit at
30-55%, so they do not say how a model does on wordings built some other way. These cells ask the
same kind of 4-digit sums (arithmetic.generate's problems, thinking and answers, efforts 50 and
75) in wordings written here by hand, each a sentence shape of its own: word problems, "the
total of", "increase ... by", terse forms. They are development data only: no training
generator reads FREE_WORDINGS (tests/tools/demo_arith_stories_test.py holds that), and they
were written without looking at the sealed set.

Each op's wordings are used in turn (item k takes wording k mod their count), so every wording is
asked at least once in 20 items. Cells: "free_add e50", "free_add e75", "free_sub e50",
"free_sub e75". Written at run time (80 items, a few KB).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import arithmetic  # noqa: E402
from demo.make_eval import _item, write_items  # noqa: E402
from demo.rng import derive_seed  # noqa: E402

FREE_WORDINGS = {
    "add": (
        "What's the sum of {a} and {b}?",
        "Tot up {a} and {b}.",
        "If I have {a} and get {b} more, how many do I have?",
        "Answer this one: {a} + {b}",
        "What number do you get by adding {a} and {b}?",
        "Increase {a} by {b}. What do you get?",
        "Sum {a} and {b}, please.",
        "Quick maths: {a} + {b}",
        "I need the sum of {a} and {b}.",
        "Combine {a} with {b}: what's the total?",
        "How much are {a} and {b} together?",
        "What do I get when {b} is added to {a}?",
        "Total up {a} and {b} for me.",
        "A shop sold {a} cups on Monday and {b} on Tuesday. How many cups in all?",
        "Please find {a} + {b}.",
        "Can you tell me the sum of {a} and {b}?",
        "Put {a} and {b} together. What's the result?",
        "{a} and {b} make how much altogether?",
        "What is {b} more than {a}?",
        "Add these two numbers: {a}, {b}.",
    ),
    "sub": (
        "What's the difference between {a} and {b}?",
        "Take {b} away from {a}: what's left?",
        "If I have {a} and give away {b}, how many are left?",
        "Answer this one: {a} - {b}",
        "Reduce {a} by {b}. What do you get?",
        "Which number lies {b} below {a}?",
        "Decrease {a} by {b}, please.",
        "Find {a} minus {b}.",
        "Deduct {b} from {a}.",
        "What is left of {a} once {b} is removed?",
        "Quick maths: {a} - {b}",
        "{a} exceeds {b} by how much?",
        "I had {a} and spent {b}. How much is left?",
        "What's {a} with {b} taken off?",
        "A tank held {a} litres and {b} litres drained out. How many litres remain?",
        "Can you do {a} minus {b} for me?",
        "Work out the difference: {a} - {b}.",
        "How much smaller is {b} than {a}?",
        "Knock {b} off {a}. What is the result?",
        "Subtract these: {a} take {b}.",
    ),
}
EFFORTS = (50, 75)


def free_items(n, seed):
    """n 4-digit problems an op, each asked at both efforts in the op's free wordings in turn."""
    for op, wordings in FREE_WORDINGS.items():
        for k in range(n):
            sample_seed = derive_seed("eval", "arithmetic-free", seed, op, k)
            for effort in EFFORTS:
                s = arithmetic.generate(sample_seed, effort=effort, mode="thinking", op=op, digits=(4, 4, 4, 4))
                question = wordings[k % len(wordings)].format(a=s.meta["a"], b=s.meta["b"])
                s.messages[0] = dict(s.messages[0], content=question)
                item = _item(s, f"arith-free-{op}-{k}-e{effort}")
                item["meta"].update(op=f"free_{op}", wording=k % len(wordings))
                yield item


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the development cells of sums in free wordings.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=20, help="problems an op (each at efforts 50 and 75)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    write_items(args.out, [free_items(args.n, args.seed)])


if __name__ == "__main__":
    main()
