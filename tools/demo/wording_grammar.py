"""Picture, arithmetic and recall questions worded from parts (issue 21): the wordings of each
picture question kind, each operation and the recall question are every combination of a frame's
interchangeable parts (an opening, the thing asked about, where to look, the closing mark), 55-160
a picture kind, 250-300 an operation and 65 for recall, against the four to twelve of
wordings.PICTURE_WORDINGS, arithmetic.VARIED_TEMPLATES and a recall fact's own. Each wording
belongs to one of two fixed halves by a hash of its text: most to training
(`training_wordings`), about DEV_PERCENT of them to the development set only (`dev_wordings`).

Why: the 1982-step model reads the picture of a question asked in new words and still answers
another kind of question ("Point out where the orange circle sits in the picture." gets "It is
small."), looks for a shape no one named, and subtracts when asked to add in new words; ten
wordings a kind teach those wordings, not the kinds. The development half measures what
training on the other half does for wordings the model never saw, so decisions about wordings
need not look at the sealed test set. These parts are our own;
tests/tools/demo_wording_grammar_test.py checks that no wording equals a sealed phrasing, shares
four words in a row with one or is one word away from one, and that the halves do not meet.
"""

import hashlib
import itertools
import re

DEV_PERCENT = 15  # the share of each kind's wordings kept for the development set

_NO_PLACE = ("",)
_PLACES = ("", " in the picture", " in the image", " in this picture", " here")
_FEW_PLACES = ("", " in the picture", " in the image")

# A frame: a tuple of parts, each a tuple of alternatives joined in order. Placeholders: {what}
# (what a count counts: "shapes", "circles", "red shapes", "red circles"), {colour}, {shape},
# {name} ("red circle"). A part that names the picture is never followed by a place that does.
PICTURE_FRAMES = {
    "count": (
        (("How many {what}",),
         (" are there", " can you see", " are visible", " are drawn", " are pictured",
          " show up", " appear", " can be seen", " have been drawn", " would you say there are"),
         _FEW_PLACES + (" in this picture", " altogether", " in total", " all told"), ("?",)),
        (("How many {what} does",), (" the picture", " the image", " this picture", " it"),
         (" show", " have", " hold"), ("?",)),
        (("Count", "Please count", "Now count", "Go through and count", "Carefully count"),
         (" the {what}", " all the {what}", " every one of the {what}", " how many {what} there are"),
         _FEW_PLACES + (" one by one",), (".",)),
        (("What's the count of", "Tell me the count of", "Give the count of", "I need the count of"),
         (" {what}", " the {what}"), _FEW_PLACES, (".",)),
        (("How many {what}",), ("", " in all", " altogether"), ("?",)),
    ),
    "exists": (
        (("Is there a", "Is there any", "Is there at least one", "Do you see a", "Do you see any",
          "Can you spot a", "Can I see a", "Is a"),
         (" {colour} {shape}",), ("", " there", " anywhere", " at all") + _FEW_PLACES[1:], ("?",)),
        (("Does it",), (" have", " show", " include"), (" a {colour} {shape}", " any {colour} {shape}"),
         ("", " anywhere", " at all"), ("?",)),
        (("Is one of the shapes", "Is any of the shapes", "Are any of the shapes"),
         (" a {colour} {shape}",), _NO_PLACE, ("?",)),
        (("Tell me whether there is", "Tell me if you see", "Let me know if there is", "Check whether there is",
          "Say if there is"),
         (" a {colour} {shape}",), _FEW_PLACES, (".",)),
    ),
    "colour_of": (
        (("What colour is the", "Which colour is the", "What colour's the", "What colour is that",
          "In what colour is the", "What colour do you see on the",
          "What colour would you call the"),
         (" {shape}",), _PLACES, ("?",)),
        (("What colour does the", "Which colour does the"), (" {shape}",), (" have", " show"), _NO_PLACE,
         ("?",)),
        (("What colour has been used for the", "What colour did they use for the", "What colour is used for the"),
         (" {shape}",), _FEW_PLACES, ("?",)),
        (("What colour was the", "Which colour was the", "What colour is the"), (" {shape}",),
         (" drawn in", " painted", " drawn with", " coloured"), ("?",)),
        (("Tell me what colour the", "Say what colour the", "Let me know which colour the", "Find out what colour the"),
         (" {shape}",), (" is",), _FEW_PLACES, (".",)),
    ),
    "shape_of": (
        (("What is the", "What's the"),
         (" {colour} one", " {colour} shape"), _PLACES, ("?",)),
        (("Which shape is", "What shape is", "Which of the shapes is", "Which of them is", "What shape was drawn in",
          "What shape is painted", "What shape is coloured"),
         (" {colour}",), _PLACES, ("?",)),
        (("What shape does the", "Which shape does the"), (" {colour} one",), (" have", " take"), ("?",)),
        (("Tell me what the", "Say what the", "Let me know what the", "Find out what the"),
         (" {colour} shape is", " {colour} one is"), _FEW_PLACES, (".",)),
    ),
    "position": (
        (("Where is the", "Where's the", "Whereabouts is the", "Where exactly is the", "Where do you see the",
          "Where does one see the", "Where is that"),
         (" {name}",), _PLACES, ("?",)),
        (("Where is the", "Where was the"), (" {name}",), (" drawn", " placed", " put", " located", " sitting"),
         _FEW_PLACES, ("?",)),
        (("Where has the",), (" {name}",), (" been drawn", " been placed", " been put"), _FEW_PLACES, ("?",)),
        (("On which side is the", "On what side is the"), (" {name}",), _PLACES, ("?",)),
        (("Which side is the", "What side is the"), (" {name}",), (" on",), ("?",)),
        (("What spot is the", "Which corner or side is the", "What part of the image is the"), (" {name}",),
         (" in",), ("?",)),
        (("Tell me where the", "Say where the", "Point out where the", "Describe where the", "Let me know where the"),
         (" {name}",), (" is", " sits", " was drawn"), _FEW_PLACES, (".",)),
        (("Give the location of the", "Tell me the location of the", "Give the position of the"),
         (" {name}",), _FEW_PLACES, (".",)),
    ),
    "size": (
        (("Is the", "Is that"), (" {name}",),
         (" small or large", " large or small", " big or small", " small or big", " a small one or a large one"),
         _FEW_PLACES, ("?",)),
        (("How big is the", "How large is the", "What size is the", "How big is that"), (" {name}",),
         _PLACES + (", small or large", ", big or small"), ("?",)),
        (("Tell me if the", "Say whether the", "Let me know if the", "Tell me whether the"), (" {name}",),
         (" is small or large", " is big or small", " is large or small"), _FEW_PLACES, (".",)),
        (("Tell me the size of the", "Give the size of the"), (" {name}",), _FEW_PLACES, (".",)),
    ),
}

# The arithmetic questions' frames (arithmetic.generate's grammar_share): {a} and {b} are the
# operands, as in arithmetic.VARIED_TEMPLATES.
_ADD = (" {a} + {b}", " {a} plus {b}", " {a} and {b} added together", " {b} added to {a}")
_SUB = (" {a} - {b}", " {a} minus {b}", " {b} subtracted from {a}", " {a} less {b}", " {a} take away {b}")
_MUL = (" {a} x {b}", " {a} times {b}", " {a} * {b}", " {a} multiplied by {b}")
_ASK = ("What is", "What's", "Do you know what", "Any idea what")
_DO = ("Calculate", "Compute", "Work out", "Figure out", "Evaluate", "Now work out", "Quickly work out", "Solve")
_GIVE = ("Tell me", "Show me", "Let me know")


def _arith(expressions, verb_frames):
    """The frames of one operation: its expressions asked, ordered and told, then its own verbs."""
    return ((_ASK[:2], expressions, ("", " exactly"), ("?",)),
            (_ASK[2:], expressions, (" is", " comes to"), ("?",)),
            (_DO, expressions, ("", " for me", " in your head"), (".", "?")),
            (_GIVE, expressions, ("", " quickly"), (".",))) + verb_frames


ARITH_FRAMES = {
    "add": _arith(_ADD, (
        (("Add", "Please add", "Now add"), (" {a} and {b}", " {b} to {a}", " together {a} and {b}", " up {a} and {b}"),
         ("", " for me"), (".",)),
        (("Can you add", "Could you add", "Would you add"), (" {a} and {b}", " {b} to {a}", " up {a} and {b}"),
         ("", " for me"), ("?",)),
        (("What do {a} and {b}",), (" add up to", " come to", " make", " sum to"), ("", " together"), ("?",)),
        (("{a} + {b}", "{a} plus {b}"), (" is", " makes", " gives", " comes to"), (" what", " how much"), ("?",)),
    )),
    "sub": _arith(_SUB, (
        (("Subtract", "Please subtract", "Now subtract", "Take"), (" {b} from {a}",), ("", " for me"), (".",)),
        (("Can you subtract", "Could you subtract", "Would you take"), (" {b} from {a}",), ("", " for me"), ("?",)),
        (("What is left when you take", "What's left after taking", "How much remains if you take"),
         (" {b} from {a}", " {b} away from {a}"), ("?",)),
        (("{a} - {b}", "{a} minus {b}"), (" is", " makes", " gives", " comes to"), (" what", " how much"), ("?",)),
    )),
    "mul": _arith(_MUL, (
        (("Multiply", "Please multiply", "Now multiply"), (" {a} by {b}", " {a} and {b}", " {b} by {a}"),
         ("", " for me"), (".",)),
        (("Can you multiply", "Could you multiply"), (" {a} by {b}", " {a} and {b}"), ("", " for me"), ("?",)),
        (("What do {a} and {b}",), (" multiply to", " make when multiplied"), ("?",)),
        (("{a} x {b}", "{a} times {b}"), (" is", " makes", " gives", " comes to"), (" what", " how much"), ("?",)),
    )),
}
# The recall questions' frames (recall.generate's grammar_share): {np} is what the fact is asked
# for by (recall.noun_phrase: "my name", "the access code", "the city I live in").
RECALL_FRAMES = {
    "recall": (
        (("What is", "What's", "What was"), (" {np}",), ("", " again", " once more", " from before"), ("?",)),
        (("Tell me", "Repeat", "Give me", "Say"), (" {np}",), ("", " again", " from before", " one more time"),
         (".",)),
        (("Do you remember", "Do you still know", "Can you recall", "Can you tell me", "Could you tell me",
          "Do you know", "Have you still got"),
         (" {np}",), ("", " from before", " from earlier"), ("?",)),
        (("I can't remember", "I've forgotten", "I lost track of", "I don't remember"), (" {np}",),
         (". What is it?", ". Can you help?", ". Do you have it?")),
        (("I need", "I'd like"), (" {np}",), (", please.", " again, please.")),
        (("You remember", "Remember", "Think back to"), (" {np}",), ("? What was it?", "? What is it?", "? Tell me.")),
    ),
}
FRAMES = {**PICTURE_FRAMES, **ARITH_FRAMES, **RECALL_FRAMES}

# What a count counts in other words: "shapes" alone (count_all) or after a colour (count_colour).
# Not "things": "How many things are ..." is four words of a sealed phrasing.
SHAPE_NOUNS = ("shapes", "objects", "items", "figures")
COLOURED_NOUNS = ("shapes", "objects", "items", "ones")

_NAMES_PICTURE = re.compile(r"\b(picture|image|it)\b")


def _expand(frame):
    for parts in itertools.product(*frame):
        text = "".join(parts)
        # one place a wording: "Does the picture show ... in the picture?" is not said
        if sum(1 for p in parts if _NAMES_PICTURE.search(p)) > 1:
            continue
        yield text


# Wordings the other generators already train (shapes._question, wordings.PICTURE_WORDINGS,
# arithmetic's templates, recall's fact questions), as is_dev keys them: never in the development
# half (tests/tools/demo_wording_grammar_test.py finds them by drawing those generators' questions).
TRAINED_ELSEWHERE = frozenset({
    "Is there a {colour} {shape}", "Say what colour the {shape} is", "What colour is the {shape}",
    "What colour's the {shape}", "What size is the {name}", "Where is the {name} in the image",
    "Whereabouts is the {name}", "Add {a} to {a}", "Calculate {a} - {a}", "Compute {a} - {a}",
    "Take {a} from {a}", "What is {a} * {a}", "Do you remember {np}",
})


def _key(template):
    return template.rstrip(".?").replace("{b}", "{a}")


def is_dev(template):
    """Whether a wording belongs to the development half: a hash of its text without the closing
    mark and with the operands unnamed (typed casually, "Count the shapes." and "Count the
    shapes?" are one wording, and so are "Multiply {a} by {b}." and "Multiply {b} by {a}."), so
    the halves stay the same whatever frames are added or taken away; never one that another
    generator trains (TRAINED_ELSEWHERE)."""
    key = _key(template)
    if key in TRAINED_ELSEWHERE:
        return False
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "little") % 100 < DEV_PERCENT


def _halves(kind):
    """(training, dev): the kind's wordings in frame order, each once."""
    wordings = list(dict.fromkeys(text for frame in FRAMES[kind] for text in _expand(frame)))
    return [t for t in wordings if not is_dev(t)], [t for t in wordings if is_dev(t)]


_HALVES = {kind: _halves(kind) for kind in FRAMES}


def training_wordings(kind):
    return _HALVES[kind][0]


def dev_wordings(kind):
    return _HALVES[kind][1]


def wordings_of(kind, split):
    """The kind's wordings of half `split` ("training" or "dev")."""
    return dev_wordings(kind) if split == "dev" else training_wordings(kind)


def check_split(where, split):
    """A generator's wording_split, checked where it is given (`where` names the generator)."""
    if split not in ("training", "dev"):
        raise ValueError(f"{where}: wording_split is 'training' or 'dev', not {split!r}")


def fill(rng, template, what, shape, colour):
    """The template with its fields filled; a count of "shapes" (alone or after a colour) names
    them with one of the other nouns half the time."""
    if what == "shapes" or what.endswith(" shapes"):
        nouns = SHAPE_NOUNS if what == "shapes" else COLOURED_NOUNS
        if rng.chance(0.5):
            what = what[: -len("shapes")] + rng.choice(nouns)
    return template.format(what=what, shape=shape, colour=colour, name=f"{colour} {shape}")
