"""Sums asked as everyday sentences and small word problems (arithmetic.generate's story_share,
issue 21): the training side of what the development cells of tools/demo/dev_free_wordings.py
measure. The 2324-step model reads "Increase a by b" and "Reduce a by b" as products, "the
difference between" as a sum, and a word problem ("If I have a and get b more ...") as small talk
(docs/demo-eval.md, "Development cells for sums in free wordings"); training only ever asked a
sum as an expression with an operation word next to it.

Every sentence here is written for training and differs from every development wording
(tests/tools/demo_arith_stories_test.py checks that no filled story is a filled development
wording). {a} and {b} are the operands (for "sub", a >= b); the filler words come from the
lists below.
"""

from demo import wordings

NAMES = ("Ana", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kemi", "Liam",
         "Maya", "Noor", "Oscar", "Priya")
THINGS = ("marbles", "stamps", "apples", "books", "coins", "stickers", "shells", "pencils", "cards", "beads")
PLACES = ("museum", "library", "zoo", "cinema", "bakery", "park")
UNITS = (("tank", "litres"), ("sack", "kilograms"), ("roll", "metres"), ("bottle", "millilitres"))

STORIES = {
    "add": (
        # verbs and nouns of adding, as plain requests
        "Raise {a} by {b}.", "{a} increased by {b} is what?", "Grow {a} by {b}. What's the new number?",
        "What is {a} after adding {b}?", "Begin with {a}, then step up by {b}. Where do you land?",
        "What total do {a} and {b} give?", "Give me the total of {a} and {b}.", "Total of {a} and {b}?",
        "{a} together with {b} is how much?", "Sum: {a}, {b}", "{a} + {b} =", "{a}+{b}?",
        "Add the numbers {a} and {b}.", "What is the combined value of {a} and {b}?",
        "{b} more than {a} is what?", "What's {a} and {b} in total?", "The sum of {a} and {b} is?",
        "Climb {b} above {a}. Which number do you reach?", "Plus {b} on top of {a} gives?",
        "Two numbers, {a} and {b}: add them.",
        # word problems
        "{name} has {a} {things}. Then {name} gets {b} more. How many {things} now?",
        "There are {a} {things} in one box and {b} in another. How many {things} altogether?",
        "A {place} had {a} visitors in the morning and {b} in the afternoon. How many visitors in all?",
        "{name} saved {a} coins and then found {b} more. How many coins does {name} have?",
        "{name} walked {a} steps before lunch and {b} after. How many steps in total?",
        "A {container} has {a} {units}, and {b} {units} are poured in. How many {units} now?",
        "{name} collected {a} {things}, and a friend gave {b} more. What is the total?",
    ),
    "sub": (
        "Lower {a} by {b}.", "{a} decreased by {b} is what?", "Cut {b} from {a}. What remains?",
        "What is {a} after removing {b}?", "Begin with {a}, then step down by {b}. Where do you land?",
        "How much more is {a} than {b}?", "Find the difference of {a} and {b}.", "The difference of {a} and {b}?",
        "{a} - {b} =", "{a}-{b}?", "Drop {a} by {b}. What do you get?", "What do you get if {a} loses {b}?",
        "{a} without {b} is how much?", "How much bigger is {a} than {b}?", "{b} less than {a} is what?",
        "Fall {b} below {a}. Which number do you reach?", "Shrink {a} by {b}.",
        "The gap between {a} and {b} is how much?", "Minus {b} from {a} gives?",
        "Two numbers, {a} and {b}: take the second from the first.",
        # word problems
        "{name} had {a} {things} and gave {b} away. How many {things} are left?",
        "There were {a} {things} on the table, and {b} were taken. How many are still there?",
        "{name} has {a} coins and spends {b}. How many coins remain?",
        "A {container} holds {a} {units}. {b} {units} are used. How many {units} are left?",
        "A {place} had {a} visitors, and {b} of them went home. How many visitors stayed?",
        "{name} needs {a} {things} and already has {b}. How many more are needed?",
        "{name} is {a} steps from home and walks {b} of them. How many steps to go?",
    ),
}


def story_question(rng, op, a, b):
    """The problem as one of STORIES[op] with its names filled in, typed as `wordings.vary` types
    a question (sometimes casually or after one of lead_ins)."""
    from demo.arithmetic import LEAD_INS  # arithmetic imports this module
    container, units = rng.choice(UNITS)
    fill = {"a": a, "b": b, "name": rng.choice(NAMES), "things": rng.choice(THINGS), "place": rng.choice(PLACES),
            "container": container, "units": units}
    return wordings.vary(rng, rng.choice(STORIES[op]), LEAD_INS).format(**fill)
